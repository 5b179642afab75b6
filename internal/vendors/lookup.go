package vendors

import (
	"net"
	"net/http"
	"strings"
)

// ShouldRetryHeaders and MillisHeaders are the headers of the signals of
// those kinds, canonical, in table order: the reader's lists.
var (
	ShouldRetryHeaders = headers(ShouldRetry)
	MillisHeaders      = headers(Millis)
)

func headers(kind Kind) []string {
	var out []string
	for _, s := range Signals {
		if s.Kind == kind {
			out = append(out, http.CanonicalHeaderKey(s.Header))
		}
	}
	return out
}

// Identify returns the SDK a request came from: the one whose own mark
// source is (a layered retry's source label), else the first whose
// Marker the request carries; nil if none.
func Identify(source string, h http.Header, host string) *SDK {
	for i := range SDKs {
		if SDKs[i].Source != "" && SDKs[i].Source == source {
			return &SDKs[i]
		}
	}
	for i := range SDKs {
		if SDKs[i].Marker.matches(h, host) {
			return &SDKs[i]
		}
	}
	return nil
}

func (m Marker) matches(h http.Header, host string) bool {
	if m.Host != "" {
		if name, _, err := net.SplitHostPort(host); err == nil {
			host = name
		}
		host = strings.ToLower(host)
		return host == m.Host || strings.HasSuffix(host, "."+m.Host)
	}
	if m.Header == "" {
		return false
	}
	v := h.Values(m.Header)
	return len(v) > 0 && strings.Contains(v[0], m.Contains)
}

// Advice is what the layered-retry warning says of the SDK: that it
// retries too, and its switch.
func (s *SDK) Advice() string {
	return s.Name + " retries too (" + plain(s.Retries) + "); to leave the retries to retryhttp: " + plain(s.Off)
}

// plain is markdown text without its code marks.
func plain(md string) string { return strings.ReplaceAll(md, "`", "") }

// SDKTable is the markdown table of the SDKs that docs/recipes.md prints.
func SDKTable() string {
	var b strings.Builder
	b.WriteString("| SDK | its retries | off | the warning knows its requests by |\n|---|---|---|---|\n")
	for _, s := range SDKs {
		row(&b, s.Name, s.Retries, s.Off, s.Marker.String())
	}
	return b.String()
}

// String is the marker as the docs print it.
func (m Marker) String() string {
	switch {
	case m.Host != "":
		return "the host `" + m.Host + "`"
	case m.Header == "":
		return "—"
	case m.Contains != "":
		return "`" + m.Header + "` with `" + m.Contains + "`"
	}
	return "`" + m.Header + "`"
}

// SignalTable is the markdown table of the signals that docs/retries.md
// prints.
func SignalTable() string {
	var b strings.Builder
	b.WriteString("| the answer carries | from | retryhttp |\n|---|---|---|\n")
	for _, s := range Signals {
		row(&b, s.Answer, s.From, s.Does)
	}
	return b.String()
}

func row(b *strings.Builder, cells ...string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + c + " |")
	}
	b.WriteString("\n")
}
