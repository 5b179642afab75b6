package retryhttp

import "github.com/retryhttp/retryhttp/internal/vendors"

// sourceAdvice is the layered-retry warning's advice for a source when
// the request shows no SDK that internal/vendors knows.
var sourceAdvice = [numLayers]string{
	layerRetryhttp: "another retryhttp Transport retries too: wrap the inner one directly, or give middleware an Unwrap method, so that only the outermost retries",
	layerKey:       "a layer above sends the same Idempotency-Key again: it retries too; turn its retries off so that one layer retries (docs/recipes.md names each SDK's switch)",
	layerRepeat:    "the same request came again right after it failed: a layer above retries too; turn its retries off so that one layer retries (docs/recipes.md names each SDK's switch)",
}

// layerAdvice is the layered-retry warning's advice: the switch of the
// SDK the request came from, by internal/vendors (the table that
// docs/recipes.md prints), or else what to do about the source.
func (k *call) layerAdvice(source int) string {
	if source != layerRetryhttp {
		if sdk := vendors.Identify(layerLabels[source], k.req.Header, k.req.URL.Host); sdk != nil {
			return sdk.Advice()
		}
	}
	if a := sourceAdvice[source]; a != "" {
		return a
	}
	return "a layer above retries too (" + layerLabels[source] + "): turn its retries off so that one layer retries (docs/recipes.md names each SDK's switch)"
}
