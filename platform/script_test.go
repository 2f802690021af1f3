package platform

import (
	"strconv"
	"strings"
	"testing"
)

func TestCheckScript(t *testing.T) {
	for name, tt := range map[string]struct {
		script string
		want   string // "" for nil, else a piece of the error
	}{
		"empty":              {script: ""},
		"1 MiB":              {script: strings.Repeat("x", 1<<20)},
		"at the limit":       {script: strings.Repeat("x", MaxScript)},
		"one byte over":      {script: strings.Repeat("x", MaxScript+1), want: "over the " + strconv.Itoa(MaxScript) + "-byte (64 MiB) limit"},
		"NUL":                {script: "echo a\x00b", want: "NUL byte (at byte 6)"},
		"multibyte and 0xff": {script: "echo é \xff"},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckScript(tt.script)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("CheckScript = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("CheckScript = %v, want an error with %q", err, tt.want)
			case err != nil && len(err.Error()) > 300:
				t.Errorf("the error is %d bytes long: it must not hold the script", len(err.Error()))
			}
		})
	}
}
