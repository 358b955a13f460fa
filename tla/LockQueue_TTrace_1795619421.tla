---- MODULE LockQueue_TTrace_1795619421 ----
EXTENDS LockQueue_TEConstants, Sequences, TLCExt, Toolbox, LockQueue, Naturals, TLC

_expression ==
    LET LockQueue_TEExpression == INSTANCE LockQueue_TEExpression
    IN LockQueue_TEExpression!expression
----

_trace ==
    LET LockQueue_TETrace == INSTANCE LockQueue_TETrace
    IN LockQueue_TETrace!trace
----

_inv ==
    ~(
        TLCGet("level") = Len(_TETrace)
        /\
        mine = ((c1 :> 1 @@ c2 :> 0 @@ c3 :> 0))
        /\
        flight = ((c1 :> 0 @@ c2 :> 0 @@ c3 :> 0))
        /\
        qleft = (0)
        /\
        wttl = ((c1 :> 1 @@ c2 :> 2 @@ c3 :> 2))
        /\
        pc = ((c1 :> "holding" @@ c2 :> "idle" @@ c3 :> "idle"))
        /\
        qdl = ((c1 :> 0 @@ c2 :> 0 @@ c3 :> 0))
        /\
        holds = ((c1 :> 1 @@ c2 :> 0 @@ c3 :> 0))
        /\
        wqt = ((c1 :> 2 @@ c2 :> 3 @@ c3 :> 3))
        /\
        queue = (<<>>)
        /\
        key = ([owner |-> None, n |-> 0, left |-> 0, prov |-> FALSE])
    )
----

_init ==
    /\ mine = _TETrace[1].mine
    /\ wqt = _TETrace[1].wqt
    /\ pc = _TETrace[1].pc
    /\ qleft = _TETrace[1].qleft
    /\ flight = _TETrace[1].flight
    /\ holds = _TETrace[1].holds
    /\ queue = _TETrace[1].queue
    /\ qdl = _TETrace[1].qdl
    /\ wttl = _TETrace[1].wttl
    /\ key = _TETrace[1].key
----

_next ==
    /\ \E i,j \in DOMAIN _TETrace:
        /\ \/ /\ j = i + 1
              /\ i = TLCGet("level")
        /\ mine  = _TETrace[i].mine
        /\ mine' = _TETrace[j].mine
        /\ wqt  = _TETrace[i].wqt
        /\ wqt' = _TETrace[j].wqt
        /\ pc  = _TETrace[i].pc
        /\ pc' = _TETrace[j].pc
        /\ qleft  = _TETrace[i].qleft
        /\ qleft' = _TETrace[j].qleft
        /\ flight  = _TETrace[i].flight
        /\ flight' = _TETrace[j].flight
        /\ holds  = _TETrace[i].holds
        /\ holds' = _TETrace[j].holds
        /\ queue  = _TETrace[i].queue
        /\ queue' = _TETrace[j].queue
        /\ qdl  = _TETrace[i].qdl
        /\ qdl' = _TETrace[j].qdl
        /\ wttl  = _TETrace[i].wttl
        /\ wttl' = _TETrace[j].wttl
        /\ key  = _TETrace[i].key
        /\ key' = _TETrace[j].key

\* Uncomment the ASSUME below to write the states of the error trace
\* to the given file in Json format. Note that you can pass any tuple
\* to `JsonSerialize`. For example, a sub-sequence of _TETrace.
    \* ASSUME
    \*     LET J == INSTANCE Json
    \*         IN J!JsonSerialize("LockQueue_TTrace_1795619421.json", _TETrace)

=============================================================================

 Note that you can extract this module `LockQueue_TEExpression`
  to a dedicated file to reuse `expression` (the module in the 
  dedicated `LockQueue_TEExpression.tla` file takes precedence 
  over the module `LockQueue_TEExpression` below).

---- MODULE LockQueue_TEExpression ----
EXTENDS LockQueue_TEConstants, Sequences, TLCExt, Toolbox, LockQueue, Naturals, TLC

expression == 
    [
        \* To hide variables of the `LockQueue` spec from the error trace,
        \* remove the variables below.  The trace will be written in the order
        \* of the fields of this record.
        mine |-> mine
        ,wqt |-> wqt
        ,pc |-> pc
        ,qleft |-> qleft
        ,flight |-> flight
        ,holds |-> holds
        ,queue |-> queue
        ,qdl |-> qdl
        ,wttl |-> wttl
        ,key |-> key
        
        \* Put additional constant-, state-, and action-level expressions here:
        \* ,_stateNumber |-> _TEPosition
        \* ,_mineUnchanged |-> mine = mine'
        
        \* Format the `mine` variable as Json value.
        \* ,_mineJson |->
        \*     LET J == INSTANCE Json
        \*     IN J!ToJson(mine)
        
        \* Lastly, you may build expressions over arbitrary sets of states by
        \* leveraging the _TETrace operator.  For example, this is how to
        \* count the number of times a spec variable changed up to the current
        \* state in the trace.
        \* ,_mineModCount |->
        \*     LET F[s \in DOMAIN _TETrace] ==
        \*         IF s = 1 THEN 0
        \*         ELSE IF _TETrace[s].mine # _TETrace[s-1].mine
        \*             THEN 1 + F[s-1] ELSE F[s-1]
        \*     IN F[_TEPosition - 1]
    ]

=============================================================================



Parsing and semantic processing can take forever if the trace below is long.
 In this case, it is advised to uncomment the module below to deserialize the
 trace from a generated binary file.

\*
\*---- MODULE LockQueue_TETrace ----
\*EXTENDS LockQueue_TEConstants, IOUtils, LockQueue, TLC
\*
\*trace == IODeserialize("LockQueue_TTrace_1795619421.bin", TRUE)
\*
\*=============================================================================
\*

---- MODULE LockQueue_TETrace ----
EXTENDS LockQueue_TEConstants, LockQueue, TLC

trace == 
    <<
    ([mine |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),flight |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),qleft |-> 0,wttl |-> (c1 :> 2 @@ c2 :> 2 @@ c3 :> 2),pc |-> (c1 :> "idle" @@ c2 :> "idle" @@ c3 :> "idle"),qdl |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),holds |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),wqt |-> (c1 :> 3 @@ c2 :> 3 @@ c3 :> 3),queue |-> <<>>,key |-> [owner |-> None, n |-> 0, left |-> 0, prov |-> FALSE]]),
    ([mine |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),flight |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),qleft |-> 0,wttl |-> (c1 :> 1 @@ c2 :> 2 @@ c3 :> 2),pc |-> (c1 :> "replying" @@ c2 :> "idle" @@ c3 :> "idle"),qdl |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),holds |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),wqt |-> (c1 :> 2 @@ c2 :> 3 @@ c3 :> 3),queue |-> <<>>,key |-> [owner |-> c1, n |-> 1, left |-> 1, prov |-> FALSE]]),
    ([mine |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),flight |-> (c1 :> 1 @@ c2 :> 0 @@ c3 :> 0),qleft |-> 0,wttl |-> (c1 :> 1 @@ c2 :> 2 @@ c3 :> 2),pc |-> (c1 :> "replying" @@ c2 :> "idle" @@ c3 :> "idle"),qdl |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),holds |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),wqt |-> (c1 :> 2 @@ c2 :> 3 @@ c3 :> 3),queue |-> <<>>,key |-> [owner |-> None, n |-> 0, left |-> 0, prov |-> FALSE]]),
    ([mine |-> (c1 :> 1 @@ c2 :> 0 @@ c3 :> 0),flight |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),qleft |-> 0,wttl |-> (c1 :> 1 @@ c2 :> 2 @@ c3 :> 2),pc |-> (c1 :> "holding" @@ c2 :> "idle" @@ c3 :> "idle"),qdl |-> (c1 :> 0 @@ c2 :> 0 @@ c3 :> 0),holds |-> (c1 :> 1 @@ c2 :> 0 @@ c3 :> 0),wqt |-> (c1 :> 2 @@ c2 :> 3 @@ c3 :> 3),queue |-> <<>>,key |-> [owner |-> None, n |-> 0, left |-> 0, prov |-> FALSE]])
    >>
----


=============================================================================

---- MODULE LockQueue_TEConstants ----
EXTENDS LockQueue

CONSTANTS c1, c2, c3

=============================================================================

---- CONFIG LockQueue_TTrace_1795619421 ----
CONSTANTS
    Clients = { c1 , c2 , c3 }
    None = None
    TTLs = { 1 , 2 }
    QTTLs = { 2 , 3 }
    HO = 1
    MaxHolds = 2
    Flight = 1
    Bug = "fromreply"
    c3 = c3
    None = None
    c1 = c1
    c2 = c2

INVARIANT
    _inv

CHECK_DEADLOCK
    \* CHECK_DEADLOCK off because of PROPERTY or INVARIANT above.
    FALSE

INIT
    _init

NEXT
    _next

CONSTANT
    _TETrace <- _trace

ALIAS
    _expression
=============================================================================
\* Generated on Wed Nov 25 15:10:21 UTC 2026