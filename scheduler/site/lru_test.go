package site

import (
	"fmt"
	"slices"
	"testing"
)

// keys lists c's keys from most to least recently used.
func keys[V any](c *LRUBytes[V]) []string {
	var out []string
	for i := c.l.head; i >= 0; i = c.l.nodes[i].next {
		out = append(out, c.l.nodes[i].key)
	}
	return out
}

func TestLRUBytes(t *testing.T) {
	type op struct {
		do   string // add, get, remove, cap
		key  string
		size int64
		want bool // result of add, get or remove
	}
	tests := []struct {
		name       string
		capacity   int64
		maxEntries int
		ops        []op
		wantKeys   []string
		wantBytes  int64
	}{
		{
			name: "evicts least recently used by bytes", capacity: 1000,
			ops:      []op{{"add", "a", 400, true}, {"add", "b", 400, true}, {"add", "c", 400, true}},
			wantKeys: []string{"c", "b"}, wantBytes: 800,
		},
		{
			name: "get refreshes recency", capacity: 1000,
			ops: []op{{"add", "a", 400, true}, {"add", "b", 400, true}, {"get", "a", 0, true},
				{"add", "c", 400, true}, {"get", "b", 0, false}},
			wantKeys: []string{"c", "a"}, wantBytes: 800,
		},
		{
			name: "one large object evicts several", capacity: 1000,
			ops:      []op{{"add", "a", 300, true}, {"add", "b", 300, true}, {"add", "c", 300, true}, {"add", "d", 900, true}},
			wantKeys: []string{"d"}, wantBytes: 900,
		},
		{
			name: "oversize is refused and drops the old entry", capacity: 1000,
			ops:      []op{{"add", "a", 100, true}, {"add", "b", 100, true}, {"add", "a", 1001, false}, {"add", "x", 5000, false}},
			wantKeys: []string{"b"}, wantBytes: 100,
		},
		{
			name: "re-adding updates the size", capacity: 1000,
			ops:      []op{{"add", "a", 100, true}, {"add", "b", 100, true}, {"add", "a", 850, true}},
			wantKeys: []string{"a", "b"}, wantBytes: 950,
		},
		{
			name: "entry bound", capacity: 1 << 30, maxEntries: 2,
			ops:      []op{{"add", "a", 1, true}, {"add", "b", 1, true}, {"add", "c", 1, true}},
			wantKeys: []string{"c", "b"}, wantBytes: 2,
		},
		{
			name: "remove and shrink capacity", capacity: 1000,
			ops: []op{{"add", "a", 300, true}, {"add", "b", 300, true}, {"add", "c", 300, true},
				{"remove", "b", 0, true}, {"remove", "b", 0, false}, {"cap", "", 300, false}},
			wantKeys: []string{"c"}, wantBytes: 300,
		},
		{
			name: "negative size refused", capacity: 1000,
			ops:      []op{{"add", "a", -1, false}},
			wantKeys: nil, wantBytes: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewLRUBytes[int](tt.capacity, tt.maxEntries)
			for k, o := range tt.ops {
				var got bool
				switch o.do {
				case "add":
					got = c.Add(o.key, k, o.size)
				case "get":
					_, got = c.Get(o.key)
				case "remove":
					got = c.Remove(o.key)
				case "cap":
					c.SetCapacity(o.size)
					got = false
				}
				if got != o.want {
					t.Errorf("op %d %s %q = %v, want %v", k, o.do, o.key, got, o.want)
				}
			}
			if got := keys(c); !slices.Equal(got, tt.wantKeys) {
				t.Errorf("keys = %v, want %v", got, tt.wantKeys)
			}
			if c.Bytes() != tt.wantBytes || c.Len() != len(tt.wantKeys) {
				t.Errorf("Bytes, Len = %d, %d; want %d, %d", c.Bytes(), c.Len(), tt.wantBytes, len(tt.wantKeys))
			}
			for _, k := range tt.wantKeys {
				if !c.Contains(k) {
					t.Errorf("Contains(%q) = false", k)
				}
			}
		})
	}
}

func TestLRUBytesValues(t *testing.T) {
	c := NewLRUBytes[[]byte](10, 0)
	c.Add("a", []byte("hello"), 5)
	if v, ok := c.Get("a"); !ok || string(v) != "hello" {
		t.Fatalf("Get(a) = %q, %v", v, ok)
	}
	c.Add("b", []byte("world!"), 6) // evicts a
	if _, ok := c.Get("a"); ok {
		t.Fatal("a still cached")
	}
	// Slots are recycled, and their values cleared.
	for i := range 100 {
		c.Add(fmt.Sprint(i), []byte("x"), 1)
	}
	if len(c.l.nodes) > 10 {
		t.Errorf("%d slots for at most 10 entries", len(c.l.nodes))
	}
	for i := c.l.free; i >= 0; i = c.l.nodes[i].next {
		if c.l.nodes[i].val != nil {
			t.Errorf("free slot %d keeps its value", i)
		}
	}
}
