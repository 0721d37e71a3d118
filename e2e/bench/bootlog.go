package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// bootLog is what a machined log says about its boot so far.
type bootLog struct {
	ready  time.Time // zero until "node ready"
	failed string    // the phase and error of a "boot failed"
}

// parseBootLog reads machined's JSON log lines; other lines are skipped.
func parseBootLog(data []byte) bootLog {
	var b bootLog

	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var rec struct {
			Time         time.Time
			Msg          string
			Phase, Error string
		}

		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}

		switch rec.Msg {
		case "node ready":
			b.ready = rec.Time
		case "boot failed":
			b.failed = fmt.Sprintf("phase %s: %s", rec.Phase, rec.Error)
		}
	}

	return b
}
