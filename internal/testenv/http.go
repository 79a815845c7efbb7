package testenv

import (
	"io"
	"net/http"
	"time"
)

// Status returns the status code of GET http://addr/path, or 0 if there is
// no answer within 5s. It keeps no connection open.
func Status(addr, path string) int {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
