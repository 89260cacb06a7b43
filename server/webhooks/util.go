package webhooks

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

func timestampOf(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// drain reads a little of a response body and closes it, so that the connection can
// be reused; receivers have nothing to say to us beyond the status.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
}
