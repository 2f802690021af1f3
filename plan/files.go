package plan

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxFileSize bounds a plan file and a --var-file: they are read whole
// and parsed in memory, so a huge file (or /dev/zero) would exhaust it.
// Plans are a few KiB; 4 MiB is far beyond any written by hand.
const MaxFileSize = 4 << 20

// readFile reads the plan or var file at path: a regular file (a FIFO,
// a device such as /dev/zero or a directory is refused) of at most
// MaxFileSize bytes. The error says why, without the "open path:" prefix.
func readFile(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errors.New("no such file")
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s): taoflow reads plans and var files from regular files only", fileKind(fi.Mode()))
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("%d bytes, more than the limit of %d MiB", fi.Size(), MaxFileSize>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("more than the limit of %d MiB", MaxFileSize>>20)
	}
	return data, nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}
