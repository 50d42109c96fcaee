package admin

import (
	"fmt"
	"net/http"

	"github.com/transmirror/transmirror/dnsd/acme"
	"github.com/transmirror/transmirror/probe/api"
)

// Challenges is what the admin API needs of the ACME DNS-01 challenges
// (implemented by acme.Book).
type Challenges interface {
	Publish(group, member, name, value string) (acme.Challenge, error)
	Remove(group, member, name, value string) (bool, error)
	List() []acme.Challenge
}

var _ Challenges = (*acme.Book)(nil)

// registerChallenges serves api.PublishChallenge and api.RemoveChallenge,
// signed with the group's secret like the member's other writes, and
// api.ListChallenges.
func (a *groupsAPI) registerChallenges(mux *http.ServeMux, ch Challenges) {
	body := func(w http.ResponseWriter, b []byte) (api.ACMEChallenge, bool) {
		var c api.ACMEChallenge
		if err := decodeStrict(b, &c); err != nil {
			writeError(w, fmt.Errorf("%w: %w", acme.ErrInvalid, err))
			return c, false
		}
		return c, true
	}
	mux.HandleFunc(api.PublishChallenge.Pattern(), a.signed(api.PublishChallenge, func(w http.ResponseWriter, r *http.Request, b []byte) {
		c, ok := body(w, b)
		if !ok {
			return
		}
		out, err := ch.Publish(r.PathValue(api.GroupParam), r.PathValue(api.MemberParam), c.Name, c.Value)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, api.ACMEChallenge{Name: out.Name, Value: out.Value, Expires: out.Expires})
	}))
	mux.HandleFunc(api.RemoveChallenge.Pattern(), a.signed(api.RemoveChallenge, func(w http.ResponseWriter, r *http.Request, b []byte) {
		c, ok := body(w, b)
		if !ok {
			return
		}
		removed, err := ch.Remove(r.PathValue(api.GroupParam), r.PathValue(api.MemberParam), c.Name, c.Value)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, api.ACMERemoved{Removed: removed})
	}))
	mux.HandleFunc(api.ListChallenges.Pattern(), func(w http.ResponseWriter, _ *http.Request) {
		out := api.ACMEChallenges{Challenges: []api.ACMELive{}}
		for _, c := range ch.List() {
			out.Challenges = append(out.Challenges, api.ACMELive{Group: c.Group, Member: c.Member, Name: c.Name, Value: c.Value, Expires: c.Expires})
		}
		writeJSON(w, http.StatusOK, out)
	})
}
