package steps

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// hashScript prints "SHA256  ./PATH" for every regular file under from
// (on the instance), the manifest at the top left out; it prints nothing
// where sha256sum is missing (scripts/hash.sh).
func hashScript(from string) string {
	return script(Params{"tf_src": from, "tf_manifest": manifestName, "tf_exit_nosource": strconv.Itoa(exitNoSource)}, "home", "hash")
}

// parseHashes reads hashScript's output into path → sha256, keeping only
// the paths keep accepts (nil: all). Escaped names (sha256sum's leading
// backslash, for a name with a newline) are left out.
func parseHashes(out []byte, keep func(string) bool) map[string]string {
	sums := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		sum, path, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 || strings.HasPrefix(sum, "\\") {
			continue
		}
		path = strings.TrimPrefix(path, "./")
		if keep == nil || keep(path) {
			sums[path] = sum
		}
	}
	if len(sums) == 0 {
		return nil
	}
	return sums
}

// checksums hashes the files under from on the instance for the manifest.
// A failure is logged and leaves the manifest without checksums (the
// copy was already verified by count and size).
func (s *Steps) checksums(ctx context.Context, req Request, from string, keep func(string) bool) map[string]string {
	res, err := s.exec(ctx, req.Instance, hashScript(from), nil)
	if err != nil || res.ExitCode != 0 {
		fmt.Fprintf(req.Log, "could not hash %s for the manifest; it records counts and sizes only\n", from)
		return nil
	}
	sums := parseHashes(res.Stdout, keep)
	if sums == nil {
		fmt.Fprintf(req.Log, "no sha256sum on %s: the manifest records counts and sizes only\n", req.Instance.Name)
	}
	return sums
}
