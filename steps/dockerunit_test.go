package steps

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/platform"
)

func TestCheckArgv(t *testing.T) {
	tests := map[string]struct {
		cmd     string
		wantErr string
	}{
		"TAO command":             {cmd: `visual_changenet train -e /data/spec.yaml train.lr='0.001' results_dir=/results/'c 0'`},
		"empty":                   {cmd: ``},
		"quoted operators":        {cmd: `echo 'a && b' "c;d" 'e|f'`},
		"escaped operator":        {cmd: `echo \;touch\ x\;`, wantErr: `an escaped ';'`},
		"quoted dollar":           {cmd: `print '$NGC_KEY'`},
		"escaped dollar":          {cmd: `print \$HOME "\$x"`, wantErr: `an escaped '$'`},
		"globs (set -f)":          {cmd: `rm *.pth model_?.pth [ab]`},
		"tilde inside a word":     {cmd: `x=~/a b~c`},
		"hash inside a word":      {cmd: `a#b`},
		"newline in quotes":       {cmd: "a 'b\nc'"},
		"and":                     {cmd: `train && rm -rf ~`, wantErr: `'&' is shell syntax`},
		"semicolon":               {cmd: `train; reboot`, wantErr: `';' is shell syntax`},
		"pipe":                    {cmd: `train | tee log`, wantErr: `'|' is shell syntax`},
		"redirect":                {cmd: `train > log`, wantErr: `'>' is shell syntax`},
		"subshell":                {cmd: `(train)`, wantErr: `'(' is shell syntax`},
		"newline":                 {cmd: "train\nreboot", wantErr: `'\n' is shell syntax`},
		"variable":                {cmd: `train --key $NGC_KEY`, wantErr: `'$' is shell syntax`},
		"variable in double":      {cmd: `train --key "$NGC_KEY"`, wantErr: `'$' inside double quotes`},
		"command substitution":    {cmd: "train `id`", wantErr: "'`' is shell syntax"},
		"backquote in double":     {cmd: "train \"`id`\"", wantErr: "'`' inside double quotes"},
		"leading tilde":           {cmd: `train ~/spec.yaml`, wantErr: `a word starting with '~'`},
		"comment":                 {cmd: `train #rest`, wantErr: `a word starting with '#'`},
		"unterminated single":     {cmd: `train 'a`, wantErr: "a quote is not closed"},
		"unterminated double":     {cmd: `train "a`, wantErr: "a quote is not closed"},
		"trailing backslash":      {cmd: `train \`, wantErr: "a trailing backslash"},
		"matrix value, injection": {cmd: `train lr='1; reboot'`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkArgv(tt.cmd)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("checkArgv(%q) = %v", tt.cmd, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("checkArgv(%q) = %v, want %q", tt.cmd, err, tt.wantErr)
			}
		})
	}
}

// TestArgvSplit: a command checkArgv accepts reaches docker as the words
// sh makes of it.
func TestArgvSplit(t *testing.T) {
	cmd := `train -e /data/spec.yaml lr='0.1 x' "a\"b" c\ d '$NGC_KEY' *.pth`
	if err := checkArgv(cmd); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", "-c", "set -f\nprintf '%s\\n' "+cmd).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "train\n-e\n/data/spec.yaml\nlr=0.1 x\na\"b\nc d\n$NGC_KEY\n*.pth\n"
	if string(out) != want {
		t.Errorf("words = %q, want %q", out, want)
	}
}

// TestRunArgs runs the submit script with a fake docker that records
// docker run's arguments: each option and value arrives as one word,
// volumes on ~ under $HOME (and their host directories made), the
// command split by the shell as written, with globbing off.
func TestRunArgs(t *testing.T) {
	s := New(Config{RunID: "r1", Owner: "laptop:42"})
	d := s.docker.(*docker)
	tests := map[string]struct {
		spec jobSpec
		want []string
		dirs []string // host directories made, under $HOME
	}{
		"minimal": {
			spec: jobSpec{ID: "tf-r1-t-a", Image: "img:1"},
			want: []string{"-d", "--name", "tf-r1-t-a", "--label", "tao-job=tf-r1-t-a", "--label", "taoflow.run=r1", "--label", "taoflow.owner=laptop:42", "img:1"},
		},
		"everything": {
			spec: jobSpec{
				ID: "tf-r1-t-c0", Instance: "gpu0", Image: "nvcr.io/nvidia/tao/tao-toolkit:7.2.0-pyt",
				Command: "visual_changenet train lr='0.1 x' *", GPUs: "device=0,1",
				Volumes: []string{"~/data:/data:ro", "~:/home", "cache:/cache", "/anon", "~/x"},
				Env:     []string{"NGC_KEY", "HF_TOKEN", "NGC_KEY"}, Workdir: "/w s", IPC: "host", ShmSize: "16g", Memory: "64g", User: "1000:1000",
			},
			want: []string{"-d", "--name", "tf-r1-t-c0", "--label", "tao-job=tf-r1-t-c0", "--label", "taoflow.run=r1", "--label", "taoflow.instance=gpu0", "--label", "taoflow.owner=laptop:42", "--gpus", `"device=0,1"`,
				"-v", "HOME/data:/data:ro", "-v", "HOME:/home", "-v", "cache:/cache", "-v", "/anon", "-v", "~/x",
				"-e", "NGC_KEY", "-e", "HF_TOKEN", "-w", "/w s", "--ipc", "host", "--shm-size", "16g", "--memory", "64g", "--user", "1000:1000",
				"nvcr.io/nvidia/tao/tao-toolkit:7.2.0-pyt", "visual_changenet", "train", "lr=0.1 x", "*"},
			dirs: []string{"data"},
		},
		"gpus all":  {spec: jobSpec{ID: "j", Instance: "gpu0", Image: "i", GPUs: "all"}, want: []string{"-d", "--name", "j", "--label", "tao-job=j", "--label", "taoflow.run=r1", "--label", "taoflow.instance=gpu0", "--label", "taoflow.owner=laptop:42", "--gpus", "all", "i"}},
		"gpus none": {spec: jobSpec{ID: "j", Instance: "gpu0", Image: "i", GPUs: "0"}, want: []string{"-d", "--name", "j", "--label", "tao-job=j", "--label", "taoflow.run=r1", "--label", "taoflow.instance=gpu0", "--label", "taoflow.owner=laptop:42", "i"}},
		"odd volume": {
			spec: jobSpec{ID: "j", Instance: "gpu0", Image: "i", Volumes: []string{"~/a b/$(touch pwned):/in"}},
			want: []string{"-d", "--name", "j", "--label", "tao-job=j", "--label", "taoflow.run=r1", "--label", "taoflow.instance=gpu0", "--label", "taoflow.owner=laptop:42", "-v", "HOME/a b/$(touch pwned):/in", "i"},
			dirs: []string{"a b/$(touch pwned)"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir, home := t.TempDir(), t.TempDir()
			// inspect and ps find nothing; run records its arguments.
			fake := "#!/bin/sh\ncase $1 in\ninspect) exit 1;;\nps) exit 0;;\nrun) shift; printf '%s\\n' \"$@\" > \"$OUT\"; echo cid;;\nesac\n"
			if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/bin/sh", "-c", d.submitScript(tt.spec))
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "OUT=" + filepath.Join(dir, "args"), "HOME=" + home}
			cmd.Dir = home
			if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "launched cid" {
				t.Fatalf("%v: %s", err, out)
			}
			b, err := os.ReadFile(filepath.Join(dir, "args"))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(strings.ReplaceAll(string(b), home, "HOME"), "\n"), "\n")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("docker run's arguments (-want +got):\n%s", diff)
			}
			for _, sub := range tt.dirs {
				if fi, err := os.Stat(filepath.Join(home, sub)); err != nil || !fi.IsDir() {
					t.Errorf("host directory %s was not made: %v", sub, err)
				}
			}
			if _, err := os.Stat(filepath.Join(home, "pwned")); err == nil {
				t.Errorf("a volume's text ran as a command")
			}
		})
	}
}

// TestLoginScript runs the login script with a fake docker that records
// its arguments and stdin: the user name arrives as the literal
// $oauthtoken (not expanded to nothing: the quoting trap of
// docs/design.md §5, ngc-auth), and the key only on stdin.
func TestLoginScript(t *testing.T) {
	const key = "nvapi-test-key-0123456789abcdef"
	s := New(Config{Secrets: testSecrets(t, "NGC_KEY", key)})
	dir := t.TempDir()
	fake := "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$OUT/args\"\ncat > \"$OUT/stdin\"\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	prelude, stdin, err := s.secretEnv([]string{"NGC_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	script := prelude + loginScript("nvcr.io", defaultNGCUser, "NGC_KEY")
	if strings.Contains(script, key) {
		t.Fatalf("the script holds the key")
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "OUT=" + dir, "oauthtoken=EXPANDED"}
	cmd.Stdin = strings.NewReader(string(stdin))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	in, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	if diff := cmp.Diff("login\nnvcr.io\n-u\n$oauthtoken\n--password-stdin\n", string(args)); diff != "" {
		t.Errorf("docker's arguments (-want +got):\n%s", diff)
	}
	if string(in) != key {
		t.Errorf("docker's stdin is %q, want the key without a newline", in)
	}
}

func TestParseDockerStatus(t *testing.T) {
	started := "2026-01-02T03:04:05.123456789Z"
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Unix()
	probes := []probe{{ID: "j0", Offset: 3}, {ID: "j1"}, {ID: "j2"}}
	header := func(lines ...string) string {
		return "motd\n@now " + itoa(start+90) + "\n" + strings.Join(lines, "\n") + "\n"
	}
	tests := map[string]struct {
		inspect     []string
		jobs        string
		want        []observation
		wantMissing []int
		wantErr     string
	}{
		"running, exited, missing": {
			inspect: []string{
				`@inspect /j0 running 0 false ` + started + ` ""`,
				`@inspect /j1 exited 3 false ` + started + ` ""`,
			},
			jobs: "@job 0 0 10 5\nhello@status " + itoa(start+60) + ` {"epoch": 2}` + "\n" +
				"@job 1 1 2 2\nx\n@status 0 \n" +
				"@job 2 0 0 0\n@status 0 \n",
			want: []observation{
				{State: stateRunning, Age: 90 * time.Second, Log: []byte("hello"), More: true, Status: `{"epoch": 2}`},
				{State: stateExited, Code: 3, Canceled: true, Age: 90 * time.Second, Log: []byte("x\n")},
				{Log: []byte{}},
			},
			wantMissing: []int{2},
		},
		"stale status.json": {
			inspect: []string{`@inspect /j0 running 0 false ` + started + ` ""`, `@inspect /j1 running 0 false ` + started + ` ""`, `@inspect /j2 running 0 false ` + started + ` ""`},
			jobs: "@job 0 0 3 0\n@status " + itoa(start-10) + ` {"epoch": 9}` + "\n" +
				"@job 1 0 0 0\n@status " + itoa(start) + ` {"epoch": 1}` + "\n" +
				"@job 2 0 0 0\n@status 0 {\"epoch\": 3}\n",
			want: []observation{
				{State: stateRunning, Age: 90 * time.Second, Log: []byte{}},
				{State: stateRunning, Age: 90 * time.Second, Log: []byte{}, Status: `{"epoch": 1}`},
				{State: stateRunning, Age: 90 * time.Second, Log: []byte{}, Status: `{"epoch": 3}`},
			},
		},
		"short log": {
			inspect: nil, jobs: "@job 0 0 20 5\nhel", wantErr: "log ended",
		},
		"wrong index": {
			jobs: "@job 1 0 0 0\n@status 0 \n", wantErr: "unexpected header",
		},
		"bad inspect line": {
			inspect: []string{"@inspect /j0 running"}, jobs: "@job 0 0 0 0\n@status 0 \n", wantErr: "unexpected inspect line",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, missing, err := parseDockerStatus([]byte(header(tt.inspect...)+tt.jobs), probes)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(observation{})); diff != "" {
				t.Errorf("observations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantMissing, missing); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestMapContainer is docs/design.md §5.2's table of docker states to job states,
// through jobOutcome to the step's error.
func TestMapContainer(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := map[string]struct {
		st        inspected
		canceled  bool
		wantState jobState
		wantNote  string
		wantClass string // of jobOutcome; "" for success or still running
		wantCode  int
		wantMsg   string
	}{
		"created":                 {st: inspected{Status: "created"}, wantState: stateRunning, wantNote: "container created, not started yet"},
		"created with an error":   {st: inspected{Status: "created", ExitCode: 127, Error: "exec: no such file"}, wantState: stateExited, wantClass: ClassLaunchFailed, wantCode: 127, wantMsg: "did not start: start_failed: exec: no such file"},
		"created, error, no code": {st: inspected{Status: "created", Error: "mount failed"}, wantState: stateExited, wantClass: ClassLaunchFailed, wantCode: 128, wantMsg: "start_failed: mount failed"},
		"running":                 {st: inspected{Status: "running", StartedAt: start}, wantState: stateRunning},
		"paused":                  {st: inspected{Status: "paused", StartedAt: start}, wantState: stateRunning, wantNote: "container is paused (taoflow neither pauses containers nor sets restart policies: someone on the instance did)"},
		"restarting":              {st: inspected{Status: "restarting", StartedAt: start}, wantState: stateRunning, wantNote: "container is restarting (taoflow neither pauses containers nor sets restart policies: someone on the instance did)"},
		"exited 0":                {st: inspected{Status: "exited", StartedAt: start}, wantState: stateExited},
		"exited 3":                {st: inspected{Status: "exited", ExitCode: 3, StartedAt: start}, wantState: stateExited, wantClass: ClassJobFailed, wantCode: 3, wantMsg: "exited with code 3"},
		"oom":                     {st: inspected{Status: "exited", ExitCode: 137, OOMKilled: true}, wantState: stateExited, wantClass: ClassJobFailed, wantCode: 137, wantMsg: "failed: oom"},
		"oom, code 0":             {st: inspected{Status: "exited", OOMKilled: true}, wantState: stateExited, wantClass: ClassJobFailed, wantMsg: "failed: oom"},
		"137 after a cancel":      {st: inspected{Status: "exited", ExitCode: 137}, canceled: true, wantState: stateExited, wantClass: ClassCanceled, wantCode: 137},
		"143 after a cancel":      {st: inspected{Status: "exited", ExitCode: 143}, canceled: true, wantState: stateExited, wantClass: ClassCanceled, wantCode: 143},
		"137, no cancel":          {st: inspected{Status: "exited", ExitCode: 137}, wantState: stateExited, wantClass: ClassJobFailed, wantCode: 137},
		"2 after a cancel":        {st: inspected{Status: "exited", ExitCode: 2}, canceled: true, wantState: stateExited, wantClass: ClassJobFailed, wantCode: 2},
		"removing after a cancel": {st: inspected{Status: "removing"}, canceled: true, wantState: stateVanished, wantClass: ClassCanceled},
		"removing":                {st: inspected{Status: "removing"}, wantState: stateRunning, wantNote: "container is being removed"},
		"dead":                    {st: inspected{Status: "dead", Error: "driver failed"}, wantState: stateVanished, wantClass: ClassVanished, wantMsg: "its container is dead (the docker daemon could not stop or remove it): driver failed"},
	}
	s := New(Config{})
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o := observation{Canceled: tt.canceled}
			mapContainer(&o, tt.st, start.Unix()+30)
			if o.State != tt.wantState || o.Note != tt.wantNote {
				t.Errorf("state %v note %q, want %v %q", o.State, o.Note, tt.wantState, tt.wantNote)
			}
			if !tt.st.StartedAt.IsZero() && o.Age != 30*time.Second {
				t.Errorf("age %v, want 30s", o.Age)
			}
			if o.State == stateRunning {
				return
			}
			err := s.jobOutcome(&watched{job: Job{ID: "j"}, inst: platform.Instance{Name: "a"}}, o)
			if tt.wantClass == "" {
				if err != nil {
					t.Errorf("outcome %v, want success", err)
				}
				return
			}
			se := stepError(t, err)
			if se.Class != tt.wantClass || se.Code != tt.wantCode || !strings.Contains(se.Msg, tt.wantMsg) {
				t.Errorf("outcome %+v, want class %q code %d with %q", se, tt.wantClass, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestLaunchError(t *testing.T) {
	d := New(Config{}).docker.(*docker)
	stderr := "Unable to find image 'x' locally\ndocker: Error response from daemon: boom.\n\nRun 'docker run --help' for more information\n"
	tests := map[int]struct{ class, msg string }{
		125:             {ClassLaunchFailed, "container j on a: docker could not start the container (exit code 125): Error response from daemon: boom."},
		126:             {ClassLaunchFailed, "container j on a: the container's command cannot be invoked (exit code 126): Error response from daemon: boom."},
		127:             {ClassLaunchFailed, "container j on a: the container's command was not found (exit code 127): Error response from daemon: boom."},
		exitNoSecret:    {ClassLaunchFailed, "container j on a: the job's secrets did not arrive on stdin"},
		exitNoDaemon:    {ClassLaunchFailed, "container j on a: Error response from daemon: boom."},
		exitNoDockerCLI: {ClassLaunchFailed, "container j: docker is not installed on a"},
	}
	for code, tt := range tests {
		e := d.launchError(platform.Instance{Name: "a"}, "j", platform.Result{ExitCode: code, Stderr: []byte(stderr)})
		if e.Class != tt.class || e.Msg != tt.msg {
			t.Errorf("code %d: %q %q, want %q %q", code, e.Class, e.Msg, tt.class, tt.msg)
		}
		if want := map[bool]int{true: code, false: 0}[code >= 125 && code <= 127]; e.Code != want {
			t.Errorf("code %d: Code %d, want %d", code, e.Code, want)
		}
	}
}

func TestPickDigest(t *testing.T) {
	tests := map[string]struct {
		image   string
		digests []string
		id      string
		want    string
	}{
		"its repo":        {"127.0.0.1:5000/t/tr:test", []string{"other/x@sha256:1", "127.0.0.1:5000/t/tr@sha256:2"}, "sha256:9", "127.0.0.1:5000/t/tr@sha256:2"},
		"docker hub":      {"docker.io/library/ubuntu:24.04", []string{"ubuntu@sha256:3"}, "sha256:9", "ubuntu@sha256:3"},
		"by digest":       {"nvcr.io/a/b@sha256:4", []string{"nvcr.io/a/b@sha256:4"}, "sha256:9", "nvcr.io/a/b@sha256:4"},
		"another repo":    {"x:1", []string{"y@sha256:5"}, "sha256:9", "y@sha256:5"},
		"built locally":   {"taoflow-trainer:test", nil, "sha256:9", "sha256:9"},
		"port, no tag":    {"localhost:5000/a", []string{"localhost:5000/a@sha256:6"}, "", "localhost:5000/a@sha256:6"},
		"nothing at all?": {"x", nil, "", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := pickDigest(tt.image, tt.digests, tt.id); got != tt.want {
				t.Errorf("pickDigest = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoopbackRegistry(t *testing.T) {
	tests := map[string]bool{
		"127.0.0.1:5000/a/b:1": true, "localhost:5000/a": true, "localhost/a": true, "[::1]:5000/a": true,
		"nvcr.io/nvidia/tao/x:1": false, "ubuntu": false, "10.0.0.1:5000/a": false, "localhost": false,
	}
	for image, want := range tests {
		if got := loopbackRegistry(image); got != want {
			t.Errorf("loopbackRegistry(%q) = %t, want %t", image, got, want)
		}
	}
}

func TestFnmatch(t *testing.T) {
	tests := map[string]struct {
		pattern string
		match   []string
		noMatch []string
	}{
		"star crosses slashes": {"*.tmp", []string{"a.tmp", "x/y/b.tmp", ".tmp"}, []string{"a.tmpx", "a.TMP"}},
		"directory":            {"checkpoints/*", []string{"checkpoints/a", "checkpoints/x/y"}, []string{"checkpoints", "x/checkpoints/a"}},
		"question mark":        {"model_?.pth", []string{"model_1.pth", "model_é.pth"}, []string{"model_12.pth"}},
		"class":                {"[ab]*", []string{"a", "b/c"}, []string{"c"}},
		"negated class":        {"[!ab]*", []string{"c", "x/a"}, []string{"a1", "b"}},
		"literal bracket":      {"a[", []string{"a["}, []string{"a"}},
		"bracket first":        {"[]x]", []string{"]", "x"}, []string{"y"}},
		"regexp characters":    {"a.b+(c)|^$", []string{"a.b+(c)|^$"}, []string{"aXb+(c)|^$"}},
		"exact":                {"taoflow-run.json", []string{"taoflow-run.json"}, []string{"x/taoflow-run.json"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			re, err := fnmatchRE(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tt.match {
				if !re.MatchString(p) {
					t.Errorf("%q does not match %q", tt.pattern, p)
				}
			}
			for _, p := range tt.noMatch {
				if re.MatchString(p) {
					t.Errorf("%q matches %q", tt.pattern, p)
				}
			}
		})
	}
}

func TestS3Listings(t *testing.T) {
	re, _ := fnmatchRE("*.tmp")
	src := parseSource([]byte("3 a\x0010 sub/b c\x005 x.tmp\x0020 taoflow-run.json\x004 sub/taoflow-run.json\x00junk\x00"), []*regexp.Regexp{re})
	if diff := cmp.Diff(map[string]int64{"a": 3, "sub/b c": 10, "sub/taoflow-run.json": 4}, src); diff != "" {
		t.Errorf("source (-want +got):\n%s", diff)
	}
	dst, err := parseObjects([]byte(`{"Contents": [{"Key": "p/a", "Size": 3}, {"Key": "p/sub/b c", "Size": 11}, {"Key": "p/taoflow-run.json", "Size": 9}, {"Key": "p/dir/", "Size": 0}, {"Key": "p/extra", "Size": 1}]}`), "p/")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int64{"a": 3, "sub/b c": 11, "extra": 1}, dst); diff != "" {
		t.Errorf("destination (-want +got):\n%s", diff)
	}
	if got := firstDifference(src, dst); got != "extra is there but not in the source" {
		t.Errorf("firstDifference = %q", got)
	}
	delete(dst, "extra")
	if got := firstDifference(src, dst); got != "sub/b c has 11 bytes, want 10" {
		t.Errorf("firstDifference = %q", got)
	}
	dst["sub/b c"] = 10
	if got := firstDifference(src, dst); got != "sub/taoflow-run.json is missing" {
		t.Errorf("firstDifference = %q", got)
	}
	if empty, err := parseObjects([]byte("\n"), ""); err != nil || len(empty) != 0 {
		t.Errorf("empty listing: %v, %v", empty, err)
	}
	if _, err := parseObjects([]byte("{"), ""); err == nil {
		t.Errorf("a broken listing parsed")
	}
}
