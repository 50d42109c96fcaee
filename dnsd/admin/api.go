package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/dnsd/acme"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/intake"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// Membership is what the admin API needs of the groups (implemented by
// Controller).
type Membership interface {
	List() api.GroupList
	View(group string) (api.GroupView, error)
	Add(group string, info api.MemberInfo) (api.MemberInfo, error)
	Remove(group, member string) error
	Drain(group, member string, on bool) error
	// Secrets are the secrets the group's signed requests may be made
	// with: the current one first, then, during a rotation, the previous.
	Secrets(group string) ([][]byte, error)
}

var _ Membership = (*members.Controller)(nil)

// Reports is what the admin API needs of the data plane's door (package
// intake): pushed load and redirect reports, authenticated, go there and
// nowhere else.
type Reports interface {
	// Load takes the body of a pushed load report for member of group.
	Load(group, member string, body []byte) error
	// Refused counts a pushed load report refused before it was looked
	// at, by the reason label of transmirror_dnsd_signed_refused_total.
	Refused(signedReason string)
	// Redirect takes a dispatcher's redirect report for group.
	Redirect(group string, r api.RedirectReport) error
}

var _ Reports = (*intake.Intake)(nil)

// MaxBody bounds the body of every write to the admin API.
const MaxBody = 64 << 10

// groupsAPI serves GROUP-QUERY, GROUP-ADD, GROUP-EXIT, LOAD-INFORM and
// drains: the routes of package api from ListGroups to UndrainMember. Writes must be signed with the group's secret
// (api.Sign); a missing or wrong signature gets 401 and changes nothing.
type groupsAPI struct {
	m      Membership
	in     Reports
	verify *api.Verifier
	now    func() time.Time
	// token returns the admin token, which drains and undrains accept
	// instead of a signature ("" for none; nil: none).
	token func() string
	// signedWith counts accepted signatures by the secret that made them
	// (secretLabels); nil counts nothing.
	signedWith *prometheus.CounterVec
	// refused counts and logs the writes refused before they are looked at.
	refused *refusals
}

// secretLabels are the values of the secret label of
// transmirror_dnsd_signed_requests_total, by the index VerifyKeys returns.
var secretLabels = [...]string{"current", "previous"}

// NewSignedRequests returns transmirror_dnsd_signed_requests_total,
// registered with reg, for Options.SignedRequests.
func NewSignedRequests(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "signed_requests_total",
		Help: "Signed admin API writes accepted, by the group secret that signed them: current, or previous (during a rotation).",
	}, []string{"secret"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("admin: register metrics: %w", err)
	}
	for _, l := range secretLabels {
		c.WithLabelValues(l)
	}
	return c, nil
}

func (a *groupsAPI) register(mux *http.ServeMux) {
	mux.HandleFunc(api.ListGroups.Pattern(), func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, a.m.List())
	})
	mux.HandleFunc(api.GetGroup.Pattern(), func(w http.ResponseWriter, r *http.Request) {
		v, err := a.m.View(r.PathValue(api.GroupParam))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	mux.HandleFunc(api.AddMember.Pattern(), a.signed(api.AddMember, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var info api.MemberInfo
		if err := decodeStrict(body, &info); err != nil {
			writeError(w, fmt.Errorf("%w: %w", members.ErrInvalidMember, err))
			return
		}
		out, err := a.m.Add(r.PathValue(api.GroupParam), info)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, out)
	}))
	mux.HandleFunc(api.RemoveMember.Pattern(), a.signed(api.RemoveMember, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if err := a.m.Remove(r.PathValue(api.GroupParam), r.PathValue(api.MemberParam)); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, api.Removed{Removed: r.PathValue(api.MemberParam)})
	}))
	if a.in != nil {
		a.registerReports(mux)
	}
	for _, op := range []struct {
		route api.Route
		on    bool
	}{{api.DrainMember, true}, {api.UndrainMember, false}} {
		mux.HandleFunc(op.route.Pattern(), a.operator(op.route, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			if err := a.m.Drain(r.PathValue(api.GroupParam), r.PathValue(api.MemberParam), op.on); err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, api.Drained{Drained: op.on, Member: r.PathValue(api.MemberParam)})
		}))
	}
}

// registerReports serves LOAD-INFORM and the dispatchers' redirect
// reports: signed, then handed to the intake, the one door of pushed
// reports.
func (a *groupsAPI) registerReports(mux *http.ServeMux) {
	mux.HandleFunc(api.PushLoad.Pattern(), a.signedCounting(api.PushLoad, a.in.Refused, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if err := a.in.Load(r.PathValue(api.GroupParam), r.PathValue(api.MemberParam), body); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, api.StatusReply{Status: "accepted"})
	}))
	mux.HandleFunc(api.PushRedirects.Pattern(), a.signed(api.PushRedirects, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var rep api.RedirectReport
		if err := decodeStrict(body, &rep); err != nil {
			writeError(w, fmt.Errorf("%w: redirect report: %w", probe.ErrInvalidReport, err))
			return
		}
		if err := a.in.Redirect(r.PathValue(api.GroupParam), rep); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, api.StatusReply{Status: "accepted"})
	}))
}

// signed reads the body (bounded), checks the request's signature with the
// group's secret and only then calls h; a refusal is counted and logged
// (refusals) for route.
func (a *groupsAPI) signed(route api.Route, h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	return a.signedCounting(route, func(string) {}, h)
}

// signedCounting is signed, and calls refused with the reason (refusedReason)
// of a request it refuses (no secret, a bad signature, a body too large).
func (a *groupsAPI) signedCounting(route api.Route, refusedPush func(reason string), h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		refused := func(err error) {
			refusedPush(refusedReason(err))
			if a.refused != nil {
				a.refused.refuse(route, r, err)
			}
		}
		body, err := readBody(w, r)
		if err != nil {
			if errors.Is(err, probe.ErrReportTooLarge) {
				refused(err)
			}
			return
		}
		secrets, err := a.m.Secrets(r.PathValue(api.GroupParam))
		if err != nil {
			refused(err)
			writeError(w, err)
			return
		}
		which, err := a.verify.VerifyRequestKeys(r, body, secrets, a.now())
		if err != nil {
			refused(err)
			w.Header().Set("WWW-Authenticate", api.SignatureScheme)
			writeJSON(w, http.StatusUnauthorized, api.ErrorReply{Error: err.Error()})
			return
		}
		if a.signedWith != nil {
			a.signedWith.WithLabelValues(secretLabels[min(which, 1)]).Inc()
		}
		h(w, r, body)
	}
}

// decodeStrict decodes one JSON object, refusing unknown fields and
// trailing data.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON: %s", api.JSONErrorAt(body, err))
	}
	if dec.More() {
		return errors.New("malformed JSON: data after the object")
	}
	return nil
}

// writeError maps an error to its status and a JSON body that says what is
// wrong.
func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, dnsd.ErrUnknownGroup), errors.Is(err, dispatch.ErrUnknownMember), errors.Is(err, zones.ErrUnknownGroup),
		errors.Is(err, probe.ErrUnknownMember):
		code = http.StatusNotFound
	case errors.Is(err, probe.ErrReportOutOfOrder):
		code = http.StatusConflict
	case errors.Is(err, probe.ErrReportFuture), errors.Is(err, probe.ErrReportStale), errors.Is(err, probe.ErrAbsurdLoad):
		code = http.StatusBadRequest
	case errors.Is(err, members.ErrStaticMember), errors.Is(err, zones.ErrDuplicateMember), errors.Is(err, zones.ErrTooManyMembers):
		code = http.StatusConflict
	case errors.Is(err, members.ErrNoSecret):
		code = http.StatusForbidden
	case errors.Is(err, members.ErrInvalidMember), errors.Is(err, probe.ErrReportSyntax),
		errors.Is(err, probe.ErrInvalidReport), errors.Is(err, probe.ErrInvalidSpec):
		code = http.StatusBadRequest
	case errors.Is(err, probe.ErrReportTooLarge):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, acme.ErrInvalid):
		code = http.StatusBadRequest
	case errors.Is(err, acme.ErrForbidden):
		code = http.StatusForbidden
	case errors.Is(err, acme.ErrLimited):
		w.Header().Set("Retry-After", strconv.Itoa(int(acme.RequestEvery/time.Second)))
		code = http.StatusTooManyRequests
	case errors.Is(err, members.ErrStoreUnavailable), errors.Is(err, acme.ErrUnavailable):
		w.Header().Set("Retry-After", "5")
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, api.ErrorReply{Error: err.Error()})
}

// readBody reads the request body, at most MaxBody bytes; when it can not,
// it writes the error reply and returns why: for a body too large, 413
// and an error that is probe.ErrReportTooLarge (a refusal the caller may
// count), else 400.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			msg := fmt.Sprintf("body larger than %d bytes", MaxBody)
			writeJSON(w, http.StatusRequestEntityTooLarge, api.ErrorReply{Error: msg})
			return nil, fmt.Errorf("%w: %s", probe.ErrReportTooLarge, msg)
		}
		writeJSON(w, http.StatusBadRequest, api.ErrorReply{Error: "reading body: " + err.Error()})
		return nil, fmt.Errorf("reading body: %w", err)
	}
	return body, nil
}
