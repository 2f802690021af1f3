package plan

import "testing"

// TestSnippet: the source line under a diagnostic, its caret under the
// column (tabs kept), nothing for a position without a line.
func TestSnippet(t *testing.T) {
	src := []byte("a: 1\n\tneeds: [pul]\r\nlast")
	tests := []struct {
		pos  Pos
		want string
	}{
		{Pos{Line: 2, Col: 10}, "    2 | \tneeds: [pul]\n      | \t        ^\n"},
		{Pos{Line: 1, Col: 1}, "    1 | a: 1\n      | ^\n"},
		{Pos{Line: 3}, "    3 | last\n"},
		{Pos{Line: 4, Col: 1}, ""},
		{Pos{}, ""},
	}
	for _, tt := range tests {
		if got := Snippet(src, tt.pos); got != tt.want {
			t.Errorf("Snippet(%v) = %q, want %q", tt.pos, got, tt.want)
		}
	}
}
