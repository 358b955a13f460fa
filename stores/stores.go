// Package stores holds the locks of the consensus stores that lockproof
// sets beside the Redis locks: etcd's (package etcdlock) and ZooKeeper's.
// It is a module of its own: the stores' client libraries (gRPC, zap,
// protobuf) stay out of the module of a user who runs a Redis lock.
package stores

import (
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/stores/etcdlock"
	"github.com/lockproof/lockproof/stores/zklock"
)

// Entries are the consensus stores' locks, each with its profile and
// predictions.
func Entries() []locker.Entry {
	return append(etcdlock.Entries(), zklock.Entries()...)
}

// Registry is a registry of the consensus stores' locks alone.
func Registry() (*locker.Registry, error) { return locker.NewRegistry(Entries()...) }
