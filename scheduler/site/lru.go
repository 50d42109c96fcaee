package site

// lru is a least-recently-used index of keys to values: a map from key to
// slot, and a doubly linked list threaded through a slice of slots by
// int32 indices, so that a full table recycles slots instead of
// allocating. Slot -1 means none. It is not safe for concurrent use.
type lru[V any] struct {
	nodes      []lruNode[V]
	index      map[string]int32
	head, tail int32 // most and least recently used
	free       int32 // first free slot, linked through next
}

// lruNode is one slot of an lru.
type lruNode[V any] struct {
	key        string
	val        V
	size       int64
	prev, next int32
}

// init makes l empty.
func (l *lru[V]) init() {
	l.nodes = nil
	l.index = make(map[string]int32)
	l.head, l.tail, l.free = -1, -1, -1
}

// len is the number of keys in l.
func (l *lru[V]) len() int { return len(l.index) }

// lookup returns key's slot without touching it, -1 when absent.
func (l *lru[V]) lookup(key string) int32 {
	if i, ok := l.index[key]; ok {
		return i
	}
	return -1
}

// touch makes slot i the most recently used.
func (l *lru[V]) touch(i int32) {
	if l.head == i {
		return
	}
	l.unlink(i)
	l.pushFront(i)
}

func (l *lru[V]) unlink(i int32) {
	n := &l.nodes[i]
	if n.prev >= 0 {
		l.nodes[n.prev].next = n.next
	} else {
		l.head = n.next
	}
	if n.next >= 0 {
		l.nodes[n.next].prev = n.prev
	} else {
		l.tail = n.prev
	}
	n.prev, n.next = -1, -1
}

func (l *lru[V]) pushFront(i int32) {
	n := &l.nodes[i]
	n.prev, n.next = -1, l.head
	if l.head >= 0 {
		l.nodes[l.head].prev = i
	}
	l.head = i
	if l.tail < 0 {
		l.tail = i
	}
}

// insert adds key, which must be absent, as the most recently used and
// returns its slot. A recycled slot keeps the value its last key left in
// it (see remove), so that callers may reuse its memory.
func (l *lru[V]) insert(key string) int32 {
	var i int32
	if l.free >= 0 {
		i = l.free
		l.free = l.nodes[i].next
	} else {
		l.nodes = append(l.nodes, lruNode[V]{})
		i = int32(len(l.nodes) - 1)
	}
	n := &l.nodes[i]
	n.key, n.size = key, 0
	l.index[key] = i
	l.pushFront(i)
	return i
}

// remove deletes slot i. With clear, its value is zeroed so that it holds
// no memory; without, insert hands it to the next key.
func (l *lru[V]) remove(i int32, clear bool) {
	l.unlink(i)
	n := &l.nodes[i]
	delete(l.index, n.key)
	n.key, n.size = "", 0
	if clear {
		var zero V
		n.val = zero
	}
	n.next = l.free
	l.free = i
}

// LRUBytes is a least-recently-used cache bounded by the total size of its
// objects in bytes and, optionally, by its number of entries. tb-ccrd uses
// it as the model of a back end's memory cache; the back ends use it as
// that very cache, so that model and cache evict alike. Memory: the values
// plus about len(key) + 80 bytes per entry. It is not safe for concurrent
// use.
type LRUBytes[V any] struct {
	l          lru[V]
	capacity   int64
	maxEntries int
	used       int64
}

// NewLRUBytes returns an empty cache of capacity bytes that holds at most
// maxEntries entries (no limit on the count when maxEntries ≤ 0).
func NewLRUBytes[V any](capacity int64, maxEntries int) *LRUBytes[V] {
	c := &LRUBytes[V]{capacity: max(capacity, 0), maxEntries: maxEntries}
	c.l.init()
	return c
}

// Get returns key's value and makes it the most recently used.
func (c *LRUBytes[V]) Get(key string) (V, bool) {
	i := c.l.lookup(key)
	if i < 0 {
		var zero V
		return zero, false
	}
	c.l.touch(i)
	return c.l.nodes[i].val, true
}

// Contains reports whether key is cached, without changing its recency.
func (c *LRUBytes[V]) Contains(key string) bool { return c.l.lookup(key) >= 0 }

// Add caches v under key with size bytes as the most recently used entry,
// replacing what key held, and evicts least recently used entries until
// the cache fits its bounds again. It returns false, and drops key, when
// size is negative or larger than the whole capacity.
func (c *LRUBytes[V]) Add(key string, v V, size int64) bool {
	i := c.l.lookup(key)
	if size < 0 || size > c.capacity {
		if i >= 0 {
			c.removeSlot(i)
		}
		return false
	}
	if i >= 0 {
		c.used -= c.l.nodes[i].size
		c.l.touch(i)
	} else {
		// Make room first, so that the freed slot takes the new key.
		for c.l.tail >= 0 && (c.used+size > c.capacity || (c.maxEntries > 0 && c.l.len() >= c.maxEntries)) {
			c.removeSlot(c.l.tail)
		}
		i = c.l.insert(key)
	}
	n := &c.l.nodes[i]
	n.val, n.size = v, size
	c.used += size
	c.shrink()
	return true
}

// Remove drops key and reports whether it was cached.
func (c *LRUBytes[V]) Remove(key string) bool {
	i := c.l.lookup(key)
	if i < 0 {
		return false
	}
	c.removeSlot(i)
	return true
}

// Len returns the number of cached entries.
func (c *LRUBytes[V]) Len() int { return c.l.len() }

// Bytes returns the total size of the cached entries.
func (c *LRUBytes[V]) Bytes() int64 { return c.used }

// Capacity returns the cache's bound in bytes.
func (c *LRUBytes[V]) Capacity() int64 { return c.capacity }

// SetCapacity changes the bound in bytes, evicting as needed.
func (c *LRUBytes[V]) SetCapacity(capacity int64) {
	c.capacity = max(capacity, 0)
	c.shrink()
}

// shrink evicts from the tail until both bounds hold.
func (c *LRUBytes[V]) shrink() {
	for c.l.tail >= 0 && (c.used > c.capacity || (c.maxEntries > 0 && c.l.len() > c.maxEntries)) {
		c.removeSlot(c.l.tail)
	}
}

func (c *LRUBytes[V]) removeSlot(i int32) {
	c.used -= c.l.nodes[i].size
	c.l.remove(i, true)
}
