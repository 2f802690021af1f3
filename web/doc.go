// Package web is taoflow's web UI and its report: an http.Handler over
// state directories (New) that shows the runs, a run's cells, nodes,
// instances, failures and results, a node's log and a comparison of runs,
// updated live with Server-Sent Events; and the same run page as one
// self-contained HTML file (WriteReport).
//
// It reads the state only (state.OpenReadOnly), but for one action, a
// run's cancel, which it leaves to the function its caller gives
// (Config.Cancel). Every string it shows comes from the state, which
// holds only redacted text (docs/design.md §10); html/template escapes it
// and Clean shows control characters as escapes, as the CLI's human
// output does.
//
// Templates, app.css and app.js are embedded (embed.FS): nothing is loaded
// from elsewhere, and the served pages carry a Content-Security-Policy
// that allows only the server's own assets and no inline script. Guard
// is the access check `taoflow ui` puts in front: a random token, then a
// cookie, and a Host and same-origin check. docs/design.md §7.8.
package web
