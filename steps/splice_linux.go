package steps

import (
	"errors"
	"os"
	"syscall"
)

// spliceFlags: move pages rather than copy them where the kernel can,
// more data follows, and never block (the pipe is the poller's).
const spliceFlags = 0x1 | 0x4 | 0x2 // SPLICE_F_MOVE | SPLICE_F_MORE | SPLICE_F_NONBLOCK

// spliceFile moves up to size bytes from fh's offset into the pipe out
// with splice(2): the bytes go from the page cache into the pipe without
// passing through this process. It returns how many it moved; fewer than
// size with no error means fh ended early.
func spliceFile(out, fh *os.File, size int64) (int64, error) {
	rc, err := out.SyscallConn()
	if err != nil {
		return 0, err
	}
	src, err := fh.SyscallConn()
	if err != nil {
		return 0, err
	}
	var done int64
	var serr error
	eof := false
	werr := rc.Write(func(wfd uintptr) bool {
		cerr := src.Control(func(rfd uintptr) {
			for done < size {
				n, err := syscall.Splice(int(rfd), nil, int(wfd), nil, int(min(size-done, 1<<30)), spliceFlags)
				switch {
				case errors.Is(err, syscall.EINTR):
					continue
				case errors.Is(err, syscall.EAGAIN):
					return // the pipe is full: wait until it can take more
				case err != nil:
					serr = err
					return
				case n == 0:
					eof = true
					return
				}
				done += n
			}
		})
		if cerr != nil {
			serr = cerr
		}
		return done >= size || eof || serr != nil
	})
	if serr != nil {
		return done, os.NewSyscallError("splice", serr)
	}
	return done, werr
}
