package history

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// MaxLineBytes bounds one history line, so that a file without newlines
// cannot exhaust memory. Real lines are a few hundred bytes.
const MaxLineBytes = 64 << 20

// ReadAll reads a JSON Lines history from r and validates every line (see
// Op.Validate for the rules). name is used in errors, as in "name:line: ...".
// Lines may come in any order; the ops are returned in file order with Line
// set. Blank lines are skipped but counted. Extra fields are ignored.
//
// A history that breaks the contract gives a *ParseError (errors.Is(err,
// ErrBadInput) holds) for its first bad line; a failing reader gives its own
// error, wrapped with name.
func ReadAll(r io.Reader, name string) ([]Op, error) {
	return ReadAllContext(context.Background(), r, name)
}

// ErrStopped is the error of a read that its context stopped (a budget
// ran out, the process was told to end): it wraps the context's cause.
var ErrStopped = errors.New("reading stopped")

// stopEvery is how many lines a read goes between looks at its context:
// often enough that a read stops within milliseconds of its budget, rarely
// enough to cost nothing measurable.
const stopEvery = 1024

// ReadAllContext is ReadAll that stops once ctx is done, with an error
// wrapping ErrStopped and ctx's cause: reading is where a history of
// millions of ops takes most of its memory, so a budget that starts only
// after it (the checker's) would come too late.
func ReadAllContext(ctx context.Context, r io.Reader, name string) ([]Op, error) {
	// Collect in fixed-size chunks and copy once: growing one slice by
	// doubling dominated the reading of large histories.
	const chunk = 4096
	var chunks [][]Op
	cur := make([]Op, 0, chunk)
	n := 0
	err := Scan(r, name, func(op Op) error {
		if n%stopEvery == 0 && ctx.Err() != nil {
			return fmt.Errorf("read history %s: %w at line %d: %w", name, ErrStopped, op.Line, context.Cause(ctx))
		}
		if len(cur) == chunk {
			chunks = append(chunks, cur)
			cur = make([]Op, 0, chunk)
		}
		cur = append(cur, op)
		n++
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		// Not worth the copy below (a large history's last moments).
		return nil, fmt.Errorf("read history %s: %w after %d ops: %w", name, ErrStopped, n, context.Cause(ctx))
	}
	if len(chunks) == 0 {
		if n == 0 {
			return nil, nil
		}
		return cur, nil
	}
	ops := make([]Op, 0, n)
	for _, c := range chunks {
		ops = append(ops, c...)
	}
	return append(ops, cur...), nil
}

// ReadFile reads and validates the history file at path (see ReadAll); a
// gzip-compressed file (as a trimmed run keeps its passing scenarios,
// history.jsonl.gz) is read as its content.
func ReadFile(path string) ([]Op, error) {
	return ReadFileContext(context.Background(), path)
}

// ReadFileContext is ReadFile that stops once ctx is done (see
// ReadAllContext).
func ReadFileContext(ctx context.Context, path string) ([]Op, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAllContext(ctx, f, path)
}

// Open opens the history file at path for ReadAll or Scan. A file that
// starts with the gzip magic is decompressed on the fly, whatever its name:
// a run keeps most of its histories compressed (docs/DESIGN.md, "Run
// directory").
func Open(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	return open(f, path)
}

// OpenIn is Open of the file name inside root: a name, or a link on the
// way, that leads out of root is refused (a run directory's files named
// by an untrusted summary.json).
func OpenIn(root *os.Root, name string) (io.ReadCloser, error) {
	f, err := root.Open(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Path = filepath.Join(root.Name(), name)
		}
		return nil, fmt.Errorf("read history: %w", err)
	}
	return open(f, filepath.Join(root.Name(), name))
}

// open reads f (named path in errors), uncompressed or gzip-compressed.
func open(f *os.File, path string) (io.ReadCloser, error) {
	br := bufio.NewReader(f)
	magic, _ := br.Peek(2)
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return readCloser{br, f}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read history %s: %w", path, err)
	}
	return readCloser{zr, multiCloser{zr, f}}, nil
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// multiCloser closes each of its closers in order, returning the first error.
type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var first error
	for _, c := range m {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Scan reads a history as ReadAll does but hands each op to fn instead of
// keeping them; an error from fn stops the scan and is returned as is.
func Scan(r io.Reader, name string, fn func(Op) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var d decoder
	var long []byte
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(long) > MaxLineBytes {
					return &ParseError{File: name, Line: line, Msg: fmt.Sprintf("line longer than %d bytes", MaxLineBytes)}
				}
				b, err = br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read history %s:%d: %w", name, line, err)
		}
		if len(b) > MaxLineBytes {
			return &ParseError{File: name, Line: line, Msg: fmt.Sprintf("line longer than %d bytes", MaxLineBytes)}
		}
		if !blank(b) {
			var op Op
			if ferr := d.parse(b, &op); ferr != nil {
				return &ParseError{File: name, Line: line, Field: ferr.field, Msg: ferr.msg}
			}
			op.Line = line
			if err := fn(op); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}
