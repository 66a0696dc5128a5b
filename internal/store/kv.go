package store

import (
	"errors"
	"sort"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// kvDB is the ordered, nested key-value database under the embedded store: a bbolt file or
// an in-memory tree. Callers copy values they keep beyond the transaction. Update callbacks
// validate before they write, so the in-memory variant needs no rollback.
type kvDB interface {
	view(fn func(kvTx) error) error
	update(fn func(kvTx) error) error
	close() error
}

type kvTx interface {
	bucket(name []byte) kvBucket
	createBucket(name []byte) (kvBucket, error)
}

type kvBucket interface {
	get(k []byte) []byte
	put(k, v []byte) error
	del(k []byte) error
	forEach(fn func(k, v []byte) error) error // keys in byte order; sub-buckets are skipped
	bucket(name []byte) kvBucket
	createBucket(name []byte) (kvBucket, error)
	deleteBucket(name []byte) error
}

// ---- bbolt ----

type boltDB struct{ db *bolt.DB }

func (d boltDB) view(fn func(kvTx) error) error {
	return d.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (d boltDB) update(fn func(kvTx) error) error {
	return d.db.Update(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (d boltDB) close() error { return d.db.Close() }

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) bucket(name []byte) kvBucket {
	if b := t.tx.Bucket(name); b != nil {
		return boltBucket{b}
	}
	return nil
}

func (t boltTx) createBucket(name []byte) (kvBucket, error) {
	b, err := t.tx.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, err
	}
	return boltBucket{b}, nil
}

type boltBucket struct{ b *bolt.Bucket }

func (b boltBucket) get(k []byte) []byte { return b.b.Get(k) }
func (b boltBucket) put(k, v []byte) error {
	return b.b.Put(k, v)
}
func (b boltBucket) del(k []byte) error { return b.b.Delete(k) }
func (b boltBucket) forEach(fn func(k, v []byte) error) error {
	return b.b.ForEach(func(k, v []byte) error {
		if v == nil { // a nested bucket
			return nil
		}
		return fn(k, v)
	})
}
func (b boltBucket) bucket(name []byte) kvBucket {
	if c := b.b.Bucket(name); c != nil {
		return boltBucket{c}
	}
	return nil
}
func (b boltBucket) createBucket(name []byte) (kvBucket, error) {
	c, err := b.b.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, err
	}
	return boltBucket{c}, nil
}
func (b boltBucket) deleteBucket(name []byte) error {
	err := b.b.DeleteBucket(name)
	if errors.Is(err, bolt.ErrBucketNotFound) {
		return nil
	}
	return err
}

// ---- in memory ----

type memDB struct {
	mu   sync.RWMutex
	root *memBucket
}

func newMemDB() *memDB { return &memDB{root: newMemBucket()} }

func (d *memDB) view(fn func(kvTx) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return fn(memTx{d.root})
}

func (d *memDB) update(fn func(kvTx) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return fn(memTx{d.root})
}

func (d *memDB) close() error { return nil }

type memTx struct{ root *memBucket }

func (t memTx) bucket(name []byte) kvBucket { return t.root.bucket(name) }
func (t memTx) createBucket(name []byte) (kvBucket, error) {
	return t.root.createBucket(name)
}

type memBucket struct {
	kv  map[string][]byte
	sub map[string]*memBucket
}

func newMemBucket() *memBucket {
	return &memBucket{kv: map[string][]byte{}, sub: map[string]*memBucket{}}
}

func (b *memBucket) get(k []byte) []byte { return b.kv[string(k)] }
func (b *memBucket) put(k, v []byte) error {
	b.kv[string(k)] = append([]byte(nil), v...)
	return nil
}
func (b *memBucket) del(k []byte) error { delete(b.kv, string(k)); return nil }
func (b *memBucket) forEach(fn func(k, v []byte) error) error {
	keys := make([]string, 0, len(b.kv))
	for k := range b.kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := fn([]byte(k), b.kv[k]); err != nil {
			return err
		}
	}
	return nil
}

// bucket returns the sub-bucket or nil. The explicit nil check keeps a nil *memBucket from
// becoming a non-nil interface value.
func (b *memBucket) bucket(name []byte) kvBucket {
	if c, ok := b.sub[string(name)]; ok {
		return c
	}
	return nil
}
func (b *memBucket) createBucket(name []byte) (kvBucket, error) {
	if c, ok := b.sub[string(name)]; ok {
		return c, nil
	}
	c := newMemBucket()
	b.sub[string(name)] = c
	return c, nil
}
func (b *memBucket) deleteBucket(name []byte) error { delete(b.sub, string(name)); return nil }
