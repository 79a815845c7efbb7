package testenv

import (
	"io"
	"net/http"
	"time"
)

// Status returns the status code of GET http://addr/path, or 0 if there is
// no answer within 5s. It keeps no connection open.
func Status(addr, path string) int {
	status, _ := Get(addr, path)
	return status
}

// Get returns the status code and body of GET http://addr/path, or 0 and
// "" if there is no answer within 5s. It keeps no connection open.
func Get(addr, path string) (status int, body string) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, ""
	}
	return resp.StatusCode, string(b)
}
