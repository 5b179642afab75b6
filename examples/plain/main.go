// Command plain is the smallest use of retryhttp: a Transport set as an
// http.Client's Transport. It fetches the URL given as its argument and
// prints the status and body.
//
//	go run ./examples/plain https://example.com/
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/retryhttp/retryhttp"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: plain URL")
	}
	if err := run(os.Stdout, os.Args[1]); err != nil {
		log.Fatal(err)
	}
}

func run(w io.Writer, url string) error {
	client := &http.Client{Transport: retryhttp.New(nil)}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s\n%s\n", resp.Status, body)
	return nil
}
