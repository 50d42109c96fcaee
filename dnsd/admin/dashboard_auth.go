package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/transmirror/transmirror/probe/api"
)

// operator guards an operator action (drain, undrain): a request that
// carries "Authorization: Bearer TOKEN" is allowed when TOKEN is the
// configured admin token; any other request must be signed with the
// group's secret (see signed).
func (a *groupsAPI) operator(route api.Route, h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	signed := a.signed(route, h)
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok {
			signed(w, r)
			return
		}
		want := ""
		if a.token != nil {
			want = a.token()
		}
		if want == "" || !tokenEqual(token, want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="transmirror"`)
			msg := "wrong admin token"
			if want == "" {
				msg = "no admin_token is configured: sign the request with the group's secret"
			}
			if a.refused != nil {
				a.refused.refuse(route, r, fmt.Errorf("%w: %s", errBadToken, msg))
			}
			writeJSON(w, http.StatusUnauthorized, api.ErrorReply{Error: msg})
			return
		}
		body, err := readBody(w, r)
		if err != nil {
			return
		}
		h(w, r, body)
	}
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// tokenEqual compares two tokens in time that depends on neither (their
// lengths included: both are hashed first).
func tokenEqual(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
