package console

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
)

// guard wraps every request: it answers only requests addressed to the
// console's own address, sets the headers that keep its pages from being
// framed or from loading anything from elsewhere, and lets a POST through
// only from the console's own origin with the process's token.
func (s *Server) guard(addr string, next http.Handler) http.Handler {
	_, port, _ := net.SplitHostPort(addr)
	hosts := map[string]bool{addr: true, net.JoinHostPort("localhost", port): true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !hosts[r.Host] {
			// A page of another site whose name now points at 127.0.0.1
			// (DNS rebinding) must not read the pages, nor their token.
			s.fail(w, r, http.StatusForbidden, "Forbidden",
				"This console answers only requests addressed to http://"+addr+"/, not to host "+r.Host+".")
			return
		}
		if r.Method == http.MethodPost {
			if why := s.refusePost(w, r); why != "" {
				s.fail(w, r, http.StatusForbidden, "Forbidden", why)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// refusePost says why a POST is refused ("" if it is not): it must come from
// a page of this console (its Origin, or else its Referer, is the console's
// own origin) and carry the token those pages embed.
func (s *Server) refusePost(w http.ResponseWriter, r *http.Request) string {
	own := "http://" + r.Host
	switch origin, referer := r.Header.Get("Origin"), r.Header.Get("Referer"); {
	case origin != "":
		if origin != own {
			return "Refused a cross-origin request: it came from " + origin + ", not from this console (" + own + "). " +
				"Actions can only be taken from the console's own pages."
		}
	case referer != "":
		u, err := url.Parse(referer)
		if err != nil || u.Scheme+"://"+u.Host != own {
			return "Refused a cross-origin request: its Referer is not a page of this console (" + own + ")."
		}
	default:
		return "Refused a request with neither an Origin nor a Referer header: actions can only be taken from the console's own pages."
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	got := r.PostFormValue("token")
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
		return "Bad or missing token: this form is not from this console's current run (it restarts with a new token). Reload the page and try again."
	}
	return ""
}
