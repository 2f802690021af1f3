package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strconv"
)

// NewToken returns a random access token (256 bits, URL-safe).
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// CookieName is the name of the cookie that carries the token of the UI
// on port: one per port, so two UIs on one host keep their own.
func CookieName(port int) string { return "taoflow_ui_" + strconv.Itoa(port) }

// Guard lets a request through to next only when it carries token: as
// ?token= (the URL `taoflow ui` prints; it then sets the cookie and
// redirects to the same URL without the token) or in the cookie. Every
// other request is 401, assets and event streams included. A request
// whose Host is not this loopback address and port is 403 (a page of
// another site that resolves its name to 127.0.0.1 cannot reach the UI).
func Guard(token string, port int, next http.Handler) http.Handler {
	name := CookieName(port)
	hosts := map[string]bool{}
	for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
		hosts[h+":"+strconv.Itoa(port)] = true
	}
	ok := func(got string) bool {
		return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		if !hosts[r.Host] {
			http.Error(w, "taoflow ui: wrong Host: open the URL taoflow ui printed", http.StatusForbidden)
			return
		}
		q := r.URL.Query()
		if t, given := q["token"]; given {
			if len(t) != 1 || !ok(t[0]) {
				unauthorized(w)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: name, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(name); err != nil || !ok(c.Value) {
			unauthorized(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func unauthorized(w http.ResponseWriter) {
	http.Error(w, "taoflow ui: not authorized: open the URL with ?token= that `taoflow ui` printed", http.StatusUnauthorized)
}

// Loopback says whether host (of an --addr) is a loopback address or
// "localhost".
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
