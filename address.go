// This file holds WithAddressRotation, whose base is internal/rotation's:
// each attempt of a request goes to an address of its host that it has
// not tried yet.

package retryhttp

import (
	"fmt"
	"net/http"

	"github.com/retryhttp/retryhttp/internal/rotation"
)

// WithAddressRotation sends each attempt of a request to an address of its
// host not yet tried by that request, when the name resolves to several:
// otherwise a retry may reuse the connection, or reach the backend, that
// just failed. First attempts take the addresses in turn, each address
// with its own pooled connections, HTTP/2 included. It needs a nil base or
// an *http.Transport, copied per address (docs/retries.md). The default
// sends every attempt as the base does.
func WithAddressRotation() Option {
	return option("WithAddressRotation", func(c *config) error {
		c.rotate = true
		return nil
	})
}

// rotationBase makes c's base rotate addresses, or says why it cannot.
func (c *config) rotationBase() error {
	switch b := c.base.(type) {
	case *http.Transport:
		// A DialContext of the base's is kept (each address's copy calls
		// it with its address); its Dial is not used once DialContext is
		// set; its DialTLS would dial https past the address chosen.
		//lint:ignore SA1019 a base that still sets the deprecated DialTLS must be refused, not ignored
		if b.DialTLSContext != nil || b.DialTLS != nil {
			return fmt.Errorf("retryhttp: WithAddressRotation: the base dials https through its own DialTLS, where no address can be chosen: set its DialContext instead")
		}
		c.base = rotation.New(b)
		return nil
	default:
		return fmt.Errorf("retryhttp: WithAddressRotation: the base is a %T, not an *http.Transport: pass a nil base or an *http.Transport", c.base)
	}
}
