package steps

import (
	"errors"

	"github.com/taoflow/taoflow/plan"
)

// CheckSettings checks the settings of req's node as its step reads them
// when it runs, without running anything or reading the secrets' values:
// what Do would refuse before touching the instance (a with.to that is no
// URL, a bucket-less s3:// URL, a path a value moves out of its directory,
// a container option Docker would refuse). plan and apply call it for
// every node, with placeholders for what only apply knows (run.id is RUN,
// a cell's instance INSTANCE), so that a setting that mixes a --var with
// ${{ run.id }} is refused before anything is created instead of after
// the training (issue 21). The error is a *Error of class
// ClassInvalidConfig or ClassUnsupported.
func (s *Steps) CheckSettings(req Request) error {
	if req.Step == nil {
		return &Error{Class: ClassInvalidConfig, Msg: "request without a step"}
	}
	var err error
	switch req.Step.Uses {
	case plan.KindPreflight:
		if _, err = withDuration(req.With, "interval", defaultProbeInterval); err != nil {
			return err
		}
		if _, err = withDuration(req.With, "ready_timeout", defaultReadyTimeout); err != nil {
			return err
		}
		if _, err = withInt(req.With, "gpus"); err != nil {
			return err
		}
		_, _, err = withBool(req.With, "docker")
	case plan.KindNGCAuth:
		_, _, _, _, err = ngcParams(req.With)
	case plan.KindPull:
		err = checkImage("with.image", withString(req.With, "image"))
	case plan.KindRun:
		_, _, _, err = s.jobSpecFor(req)
	case plan.KindWait:
		if _, err = withDuration(req.With, "interval", s.cfg.PollInterval); err != nil {
			return err
		}
		_, err = withDuration(req.With, "timeout", 0)
	case plan.KindUploadS3:
		_, _, _, err = s.uploadParams(req)
	case plan.KindSend:
		var patterns []string
		if _, _, patterns, err = s.sendParams(req); err == nil {
			_, err = excludeMatchers(patterns)
		}
	case plan.KindFetch:
		_, _, err = s.fetchParams(req)
	case plan.KindDownloadS3:
		_, _, _, err = s.downloadParams(req)
	case plan.KindDelete:
		_, _, err = withBool(req.With, "force")
	default:
		return &Error{Class: ClassUnsupported, Msg: "unknown step kind " + req.Step.Uses}
	}
	return err
}

// SettingsError reports whether err is a failure of a step's own settings,
// found before it touched its instance (ClassInvalidConfig,
// ClassUnsupported): such a step copied nothing and lost nothing.
func (e *Error) SettingsError() bool {
	return e.Class == ClassInvalidConfig || e.Class == ClassUnsupported
}

// IsSettings reports whether err's chain holds a settings *Error.
func IsSettings(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.SettingsError()
}
