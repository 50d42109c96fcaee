package scheduler

// maxTop is the largest N that hash and least-load rank in one pass on the
// stack; larger N take one pass per member picked.
const maxTop = 8

// ranked is a member with its rank: higher a, then higher b, is better.
type ranked struct {
	i int
	a float64
	b uint64
}

func (x ranked) better(y ranked) bool { return x.a > y.a || (x.a == y.a && x.b > y.b) }

// topN keeps the n ≤ maxTop best members offered, best first.
type topN struct {
	n, cnt int
	e      [maxTop]ranked
}

// offer considers member i with rank (a, b).
func (t *topN) offer(i int, a float64, b uint64) {
	x := ranked{i, a, b}
	if t.cnt == t.n {
		if !x.better(t.e[t.cnt-1]) {
			return
		}
		t.cnt--
	}
	j := t.cnt
	for ; j > 0 && x.better(t.e[j-1]); j-- {
		t.e[j] = t.e[j-1]
	}
	t.e[j] = x
	t.cnt++
}

// appendTo appends the members kept, best first.
func (t *topN) appendTo(dst []int) []int {
	for _, x := range t.e[:t.cnt] {
		dst = append(dst, x.i)
	}
	return dst
}

// rankAll appends the q.N best members of elig by rank, which must be a
// deterministic function of the member.
func rankAll(dst []int, n int, elig []int, rank func(i int) (float64, uint64)) []int {
	if n <= 0 {
		return dst
	}
	if n <= maxTop {
		t := topN{n: n}
		for _, i := range elig {
			a, b := rank(i)
			t.offer(i, a, b)
		}
		return t.appendTo(dst)
	}
	base := len(dst)
	for len(dst)-base < n {
		t := topN{n: 1}
		for _, i := range elig {
			if !has(dst[base:], i) {
				a, b := rank(i)
				t.offer(i, a, b)
			}
		}
		if t.cnt == 0 {
			break
		}
		dst = t.appendTo(dst)
	}
	return dst
}
