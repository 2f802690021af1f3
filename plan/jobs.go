package plan

import "strings"

// JobID names the job (and container) a run node launches:
// tf-<run>-<step>.<cell|instance>, limited to [a-zA-Z0-9][a-zA-Z0-9_.-]*
// (other characters become _). It is deterministic, so a retry or a resume
// finds the job it launched before, and injective within a run: a step id
// holds no '.', so the first '.' after the run ends the step. (With '-'
// there, step a × cell x-y-z and step a-x × cell y-z were one job, and the
// second step adopted the first's job instead of running.)
func JobID(run, step, suffix string) string {
	return sanitizeJob("tf-"+run+"-") + sanitizeJob(strings.ReplaceAll(step, ".", "_")) + "." + sanitizeJob(suffix)
}

// JobPrefix is the start of every job id of a run, "tf-<run>-", sanitised
// as job ids are.
func JobPrefix(run string) string {
	return sanitizeJob("tf-" + run + "-")
}

func sanitizeJob(id string) string {
	var b strings.Builder
	for i, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if i > 0 && (r == '_' || r == '.' || r == '-') {
			ok = true
		}
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
