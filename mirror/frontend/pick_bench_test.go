package frontend

import (
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"testing"

	"github.com/transmirror/transmirror/mirror/content"
)

// BenchmarkPick measures the front end's work per request up to the back
// end and back: the policy request, the content map's answer (with
// site.content), the back ends' snapshot, the policy's Pick and Done;
// over four back ends with lard. content=off is the site without
// site.content; content=held has every back end's index known and half
// of them holding the file.
func BenchmarkPick(b *testing.B) {
	held := &fakeMap{
		copies:  map[string]map[string]content.Copy{"pub/dist/file.tar.gz": {"b0": {Size: 1}, "b2": {Size: 1}}},
		indexed: map[string]bool{"b0": true, "b1": true, "b2": true, "b3": true},
	}
	for _, c := range []struct {
		name string
		m    *fakeMap
	}{{"content=off", nil}, {"content=held", held}} {
		b.Run(c.name, func(b *testing.B) {
			bs := make([]Backend, 4)
			for i := range bs {
				bs[i] = Backend{Name: fmt.Sprintf("b%d", i), URL: fmt.Sprintf("http://127.0.0.1:%d", 1+i), Weight: 1}
			}
			o := Options{Rand: rand.New(rand.NewPCG(1, 2))}
			if c.m != nil {
				o.Content = c.m
			}
			hh, closer, err := New(Config{Policy: PolicyConfig{Name: "lard"}, Health: quietHealth, Content: c.m != nil}, bs, o)
			if err != nil {
				b.Fatal(err)
			}
			defer closer.Close()
			h := hh.(*handler)
			r := httptest.NewRequest("GET", "/pub/dist/file.tar.gz", nil)
			b.ReportAllocs()
			for b.Loop() {
				req := policyRequest(r, false)
				h.restrict(r, &req)
				be, err := h.pick(req, nil)
				if err != nil {
					b.Fatal(err)
				}
				h.release(be, req, 0)
			}
		})
	}
}
