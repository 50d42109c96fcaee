package site

import "testing"

func TestAdmissionLimit(t *testing.T) {
	for _, tt := range []struct {
		name    string
		policy  string
		p       Params
		weights float64
		want    int
	}{
		{"paper: 4 back ends", LARD, Params{}, 4, 3*65 + 25 - 1},
		{"one back end", LARD, Params{}, 1, 24},
		{"no back end counts as one", LARD, Params{}, 0, 24},
		{"thresholds", LARD, Params{TLow: 1, THigh: 2}, 2, 2},
		{"weights count as back ends", LARD, Params{}, 2.5, 121}, // floor(1.5·65 + 25 − 1)
		{"at least one", LARD, Params{TLow: 0.5, THigh: 1}, 1, 1},
		{"lard-r", LARDR, Params{}, 2, 89},
		{"tb-ccrd", TBCCRD, Params{}, 2, 89},
		{"wrr has none", WRR, Params{}, 4, 0},
		{"least-conn has none", LeastConn, Params{}, 4, 0},
		{"client-hash has none", ClientHash, Params{}, 4, 0},
		{"ward has none", WARD, Params{}, 4, 0},
		{"chbl has none", CHBL, Params{}, 4, 0},
		{"not a policy", "nope", Params{}, 4, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := AdmissionLimit(tt.policy, tt.p, tt.weights); got != tt.want {
				t.Errorf("AdmissionLimit(%q, %+v, %g) = %d, want %d", tt.policy, tt.p, tt.weights, got, tt.want)
			}
		})
	}
}
