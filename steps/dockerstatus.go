package steps

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// This file reads what the container scripts print (scripts/docker-*.sh):
// pure functions, no I/O, unit tested against the scripts' output shapes.

// Reasons of observations of containers (observation.Reason).
const (
	reasonOOM         = "oom"
	reasonStartFailed = "start_failed"
)

// inspectFormat is the one docker inspect of a poll: a line per container
// that exists (its error as a JSON string, so it stays one line).
const inspectFormat = `@inspect {{.Name}} {{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}} {{.State.StartedAt}} {{json .State.Error}}`

// inspected is one container's state from docker inspect.
type inspected struct {
	Status    string
	ExitCode  int
	OOMKilled bool
	StartedAt time.Time // zero when it never started
	Error     string
}

// parseDockerStatus reads the output of statusScript. It returns the
// indexes of the probes whose container docker inspect did not find.
func parseDockerStatus(out []byte, probes []probe) ([]observation, []int, error) {
	r := bufio.NewReader(bytes.NewReader(out))
	var now int64
	found := map[string]inspected{}
	obs := make([]observation, len(probes))
	var missing []int
	for i, p := range probes {
		var header string
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return nil, nil, fmt.Errorf("job %d: output ended early", i)
			}
			l = strings.TrimSuffix(l, "\n")
			switch {
			case strings.HasPrefix(l, "@job "):
				header = l
			case strings.HasPrefix(l, "@now ") && i == 0:
				now, _ = strconv.ParseInt(strings.TrimPrefix(l, "@now "), 10, 64)
			case strings.HasPrefix(l, "@inspect ") && i == 0:
				name, st, err := parseInspect(l)
				if err != nil {
					return nil, nil, err
				}
				found[name] = st
			}
			if header != "" {
				break
			}
		}
		f := strings.Fields(header)
		if len(f) != 5 || f[1] != strconv.Itoa(i) {
			return nil, nil, fmt.Errorf("job %d: unexpected header %q", i, header)
		}
		var nums [2]int64
		for k, s := range f[3:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v < 0 {
				return nil, nil, fmt.Errorf("job %d: bad number %q", i, s)
			}
			nums[k] = v
		}
		size, chunk := nums[0], nums[1]
		o := &obs[i]
		o.Canceled = f[2] == "1"
		o.Log = make([]byte, chunk)
		if _, err := io.ReadFull(r, o.Log); err != nil {
			return nil, nil, fmt.Errorf("job %d: log ended after %d bytes, want %d", i, len(o.Log), chunk)
		}
		o.More = size > p.Offset+chunk
		lines, l, err := readStatus(r)
		if err != nil {
			return nil, nil, fmt.Errorf("job %d: %w", i, err)
		}
		mtime, line, _ := strings.Cut(l, " ")
		st, ok := found[p.ID]
		if !ok {
			missing = append(missing, i)
			continue
		}
		mapContainer(o, st, now)
		if mt, err := strconv.ParseInt(mtime, 10, 64); err == nil && !st.StartedAt.IsZero() && mt > 0 && mt < st.StartedAt.Unix() {
			line, lines = "", nil // written by an earlier attempt
		}
		o.Status, o.StatusLines = line, lines
	}
	return obs, missing, nil
}

// parseInspect reads one @inspect line.
func parseInspect(l string) (string, inspected, error) {
	f := strings.SplitN(l, " ", 7)
	if len(f) != 7 {
		return "", inspected{}, fmt.Errorf("unexpected inspect line %q", l)
	}
	var st inspected
	st.Status = f[2]
	code, err := strconv.Atoi(f[3])
	if err != nil {
		return "", inspected{}, fmt.Errorf("unexpected exit code in %q", l)
	}
	st.ExitCode = code
	st.OOMKilled = f[4] == "true"
	if t, err := time.Parse(time.RFC3339Nano, f[5]); err == nil && t.Year() > 1 {
		st.StartedAt = t
	}
	if err := json.Unmarshal([]byte(f[6]), &st.Error); err != nil {
		st.Error = f[6]
	}
	return strings.TrimPrefix(f[1], "/"), st, nil
}

// mapContainer sets o's state from docker's (docs/design.md §5.2):
//
//	created              pending (running), or failed start_failed when .State.Error is set
//	running              running
//	paused, restarting   running, with a note (taoflow does neither)
//	exited               exited with its code; OOMKilled is failed "oom"
//	                     (137/143 after a cancel by taoflow: canceled, in jobOutcome)
//	removing             canceled after a cancel by taoflow, else running until it is gone
//	dead                 vanished
//
// now is the instance's clock, for the job's age.
func mapContainer(o *observation, st inspected, now int64) {
	if !st.StartedAt.IsZero() && now > 0 {
		o.Age = time.Duration(max(now-st.StartedAt.Unix(), 0)) * time.Second
	}
	switch st.Status {
	case "created":
		if st.Error != "" {
			o.State, o.Code = stateExited, st.ExitCode
			if o.Code == 0 {
				o.Code = 128
			}
			o.Reason = reasonStartFailed + ": " + st.Error
			return
		}
		o.State, o.Note = stateRunning, "container created, not started yet"
	case "running":
		o.State = stateRunning
	case "paused", "restarting":
		o.State = stateRunning
		o.Note = "container is " + st.Status + " (taoflow neither pauses containers nor sets restart policies: someone on the instance did)"
	case "exited":
		o.State, o.Code = stateExited, st.ExitCode
		if st.OOMKilled {
			o.Reason = reasonOOM
		}
	case "removing":
		if o.Canceled {
			o.State = stateVanished
			return
		}
		o.State, o.Note = stateRunning, "container is being removed"
	case "dead":
		o.State = stateVanished
		o.Reason = "its container is dead (the docker daemon could not stop or remove it)"
		if st.Error != "" {
			o.Reason += ": " + st.Error
		}
	default:
		o.State, o.Note = stateRunning, fmt.Sprintf("container is in an unknown state %q", st.Status)
	}
}
