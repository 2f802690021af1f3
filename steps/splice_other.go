//go:build !linux

package steps

import (
	"io"
	"os"
)

// spliceFile copies up to size bytes from fh's offset to out (splice(2)
// is Linux's; elsewhere this is a plain copy).
func spliceFile(out, fh *os.File, size int64) (int64, error) {
	return io.Copy(out, io.LimitReader(fh, size))
}
