package ssh

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMarkers(t *testing.T) {
	const p = "__taoflow_0123456789abcdef:"
	type result struct {
		Out     string
		PID     int
		RC      int
		Started bool
		Ended   bool
		Short   int // bytes of a script that came in part (0: not reported)
	}
	tests := map[string]struct {
		writes []string
		want   result
	}{
		"nothing": {nil, result{}},
		"both markers only": {
			[]string{p + "pid=42\n" + p + "rc=7\n"},
			result{PID: 42, RC: 7, Started: true, Ended: true},
		},
		"output around and between": {
			[]string{"rc file says hi\n" + p + "pid=42\nerr 1\nerr 2", p + "rc=0\nlate\n"},
			result{Out: "rc file says hi\nerr 1\nerr 2late\n", PID: 42, Started: true, Ended: true},
		},
		"split byte by byte": {
			strings.Split("a"+p+"pid=9\nb"+p+"rc=3\nc", ""),
			result{Out: "abc", PID: 9, RC: 3, Started: true, Ended: true},
		},
		"start only (connection lost)": {
			[]string{p + "pid=5\nworking\n"},
			result{Out: "working\n", PID: 5, Started: true},
		},
		"rc before pid is not taken": {
			[]string{p + "rc=1\n"},
			result{Out: p + "rc=1\n"},
		},
		"second pid line kept": {
			[]string{p + "pid=5\n" + p + "pid=6\n"},
			result{Out: p + "pid=6\n", PID: 5, Started: true},
		},
		"not a number": {
			[]string{p + "pid=x\n"},
			result{Out: p + "pid=x\n"},
		},
		"other nonce": {
			[]string{"__taoflow_ffffffffffffffff:pid=1\n"},
			result{Out: "__taoflow_ffffffffffffffff:pid=1\n"},
		},
		"partial prefix at the end": {
			[]string{"ssh: error\n" + p[:10]},
			result{Out: "ssh: error\n" + p[:10]},
		},
		"unterminated marker at the end": {
			[]string{p + "pid=12"},
			result{Out: p + "pid=12"},
		},
		"script came in part": {
			[]string{p + "pid=42\n" + p + "short=1000\n"},
			result{PID: 42, Started: true, Short: 1000},
		},
		"short before pid is not taken": {
			[]string{p + "short=3\n"},
			result{Out: p + "short=3\n"},
		},
		"long line after prefix": {
			[]string{p + strings.Repeat("x", 100), "\n"},
			result{Out: p + strings.Repeat("x", 100) + "\n"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			m := newMarkers(p, &out)
			for _, w := range tt.writes {
				if n, err := m.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			m.flush()
			rc, ended := m.exit()
			if !ended {
				rc = 0
			}
			got := result{Out: out.String(), PID: m.startedPID(), RC: rc, Started: m.hasStarted(), Ended: ended}
			if n, ok := m.short(); ok {
				got.Short = n
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
