package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/elastic/go-elasticsearch/v8/esutil"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retrytest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The search, declared safe by the policy, is retried, and so is the
// bulk of creates by _id, declared safe for its call; the write is sent
// once, and its 503 reaches the caller.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"search (declared safe, 503 first): status 200 after 2 attempts",
		"bulk of creates by _id (declared safe for its call, 503 first): status 200 after 2 attempts",
		"index (a write, 503 first): status 503 after 1 attempt(s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// call is one request of the client's API.
type call func(es *elasticsearch.Client) (*esapi.Response, error)

func body(s string) io.Reader { return strings.NewReader(s) }

func intp(n int) *int { return &n }

var logs = []string{"logs"}

// reads are the client's reads that it sends as POSTs, each in the forms
// the policy names (with an index and without), and the path it sends.
var reads = []struct {
	path string
	call call
}{
	{"/_search", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Search(es.Search.WithBody(body(`{}`)))
	}},
	{"/logs/_search", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.Search(es.Search.WithIndex("logs")) }},
	{"/_search/template", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.SearchTemplate(body(`{"id":"t"}`)) }},
	{"/logs/_search/template", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.SearchTemplate(body(`{"id":"t"}`), es.SearchTemplate.WithIndex("logs"))
	}},
	{"/_msearch", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.Msearch(body("{}\n{}\n")) }},
	{"/logs/_msearch", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Msearch(body("{}\n{}\n"), es.Msearch.WithIndex("logs"))
	}},
	{"/_msearch/template", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.MsearchTemplate(body("{}\n{\"id\":\"t\"}\n"))
	}},
	{"/logs/_msearch/template", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.MsearchTemplate(body("{}\n{\"id\":\"t\"}\n"), es.MsearchTemplate.WithIndex("logs"))
	}},
	{"/_count", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.Count() }},
	{"/logs/_count", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.Count(es.Count.WithIndex("logs")) }},
	{"/_mget", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Mget(body(`{"docs":[{"_index":"logs","_id":"1"}]}`))
	}},
	{"/logs/_mget", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Mget(body(`{"ids":["1"]}`), es.Mget.WithIndex("logs"))
	}},
	{"/logs/_explain/1", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Explain("logs", "1", es.Explain.WithBody(body(`{"query":{"match_all":{}}}`)))
	}},
	{"/_field_caps", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.FieldCaps(es.FieldCaps.WithFields("*"))
	}},
	{"/logs/_field_caps", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.FieldCaps(es.FieldCaps.WithIndex("logs"), es.FieldCaps.WithFields("*"))
	}},
	{"/logs/_termvectors", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Termvectors("logs", es.Termvectors.WithBody(body(`{"doc":{"msg":"hi"}}`)))
	}},
	{"/logs/_termvectors/1", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Termvectors("logs", es.Termvectors.WithDocumentID("1"))
	}},
	{"/_mtermvectors", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Mtermvectors(es.Mtermvectors.WithBody(body(`{"docs":[{"_index":"logs","_id":"1"}]}`)))
	}},
	{"/logs/_mtermvectors", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Mtermvectors(es.Mtermvectors.WithIndex("logs"), es.Mtermvectors.WithBody(body(`{"ids":["1"]}`)))
	}},
	{"/_rank_eval", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.RankEval(body(`{"requests":[]}`)) }},
	{"/logs/_rank_eval", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.RankEval(body(`{"requests":[]}`), es.RankEval.WithIndex("logs"))
	}},
	{"/_validate/query", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Indices.ValidateQuery(es.Indices.ValidateQuery.WithBody(body(`{"query":{"match_all":{}}}`)))
	}},
	{"/logs/_validate/query", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Indices.ValidateQuery(es.Indices.ValidateQuery.WithIndex("logs"))
	}},
	{"/_search_shards", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.SearchShards() }},
	{"/logs/_search_shards", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.SearchShards(es.SearchShards.WithIndex("logs"))
	}},
	{"/logs/_knn_search", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.KnnSearch(logs, es.KnnSearch.WithBody(body(`{"knn":{"field":"v","query_vector":[1],"k":1,"num_candidates":1}}`)))
	}},
	{"/logs/_terms_enum", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.TermsEnum(logs, es.TermsEnum.WithBody(body(`{"field":"msg"}`)))
	}},
	{"/_render/template", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.RenderSearchTemplate(es.RenderSearchTemplate.WithBody(body(`{"id":"t"}`)))
	}},
	{"/_render/template/t", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.RenderSearchTemplate(es.RenderSearchTemplate.WithTemplateID("t"))
	}},
	{"/logs/_mvt/loc/3/1/2", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.SearchMvt(logs, "loc", intp(1), intp(2), intp(3))
	}},
	{"/_analyze", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Indices.Analyze(es.Indices.Analyze.WithBody(body(`{"text":"hi"}`)))
	}},
	{"/logs/_analyze", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Indices.Analyze(es.Indices.Analyze.WithIndex("logs"), es.Indices.Analyze.WithBody(body(`{"text":"hi"}`)))
	}},
	{"/_query", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.EsqlQuery(body(`{"query":"FROM logs"}`))
	}},
}

// once are requests that the recipe sends once after they reached the
// cluster (the client alone sends each again on a 502, 503 or 504): the
// writes, which a repeat may apply twice, and the reads that keep
// something on the cluster (a scroll's cursor, a point in time, a stored
// search, an SQL cursor), which a repeat moves on or keeps twice.
var once = []struct {
	path string
	call call
}{
	{"/_bulk", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Bulk(body("{\"index\":{\"_index\":\"logs\"}}\n{\"msg\":\"hi\"}\n"))
	}},
	{"/logs/_doc", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.Index("logs", body(`{"msg":"hi"}`)) }},
	{"/logs/_update/1", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Update("logs", "1", body(`{"script":"ctx._source.n += 1"}`))
	}},
	{"/logs/_delete_by_query", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.DeleteByQuery(logs, body(`{"query":{"match_all":{}}}`))
	}},
	{"/logs/_update_by_query", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.UpdateByQuery(logs) }},
	{"/_reindex", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Reindex(body(`{"source":{"index":"logs"},"dest":{"index":"logs2"}}`))
	}},
	{"/_search/scroll", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.Scroll(es.Scroll.WithScrollID("c2Nyb2xs"))
	}},
	{"/logs/_pit", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.OpenPointInTime(logs, "1m") }},
	{"/_async_search", func(es *elasticsearch.Client) (*esapi.Response, error) { return es.AsyncSearch.Submit() }},
	{"/logs/_eql/search", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.EqlSearch("logs", body(`{"query":"any where true"}`))
	}},
	{"/_sql", func(es *elasticsearch.Client) (*esapi.Response, error) {
		return es.SQL.Query(body(`{"query":"SELECT 1"}`))
	}},
}

var product = http.Header{"X-Elastic-Product": {"Elasticsearch"}, "Content-Type": {"application/json"}}

// sends makes one call against a fake cluster that answers its first try
// with the status first and every other 200, through the recipe or, alone,
// through the client with its own retries on (its default, 3), and returns
// what the fake received and the status the caller got.
func sends(t *testing.T, alone bool, first int, c call) ([]retrytest.Attempt, int) {
	t.Helper()
	srv := retrytest.NewUnstartedServer(retrytest.Reply{Status: first, Header: product, Body: `{"status":503}`})
	srv.Then = retrytest.Reply{Header: product, Body: `{}`}
	srv.Start()
	defer srv.Close()
	es, err := newClient(srv.URL)
	if alone {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		es, err = elasticsearch.NewClient(elasticsearch.Config{Addresses: []string{srv.URL}, Transport: tr})
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := c(es)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return srv.Attempts(), res.StatusCode
}

// Every read that the client sends as a POST, and retries alone, is
// retried through the recipe: answered 503, then 200, it succeeds in two
// sends, the same POST twice.
func TestReadsOverPOSTRetriedAsTheClientAloneDoes(t *testing.T) {
	for _, r := range reads {
		t.Run(r.path, func(t *testing.T) {
			for _, alone := range []bool{true, false} {
				as, status := sends(t, alone, http.StatusServiceUnavailable, r.call)
				if status != http.StatusOK || len(as) != 2 {
					t.Errorf("alone %v: status %d after %d sends, want 200 after 2", alone, status, len(as))
				}
				for i, a := range as {
					if a.Method != http.MethodPost || a.Path != r.path {
						t.Errorf("alone %v: send %d was %s %s, want POST %s", alone, i+1, a.Method, a.Path, r.path)
					}
				}
				if err := retrytest.CheckSameBody(as, nil); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// The writes, and the reads that keep something on the cluster, are not
// declared: through the recipe each is sent once, and its 503 reaches the
// caller, where the client alone would have sent it again.
func TestWritesAndStatefulReadsSentOnce(t *testing.T) {
	for _, r := range once {
		t.Run(r.path, func(t *testing.T) {
			if as, _ := sends(t, true, http.StatusServiceUnavailable, r.call); len(as) != 2 {
				t.Errorf("the client alone sent it %d times, want 2", len(as))
			}
			as, status := sends(t, false, http.StatusServiceUnavailable, r.call)
			if status != http.StatusServiceUnavailable || len(as) != 1 {
				t.Errorf("status %d after %d sends, want 503 after 1", status, len(as))
			}
			if len(as) > 0 && (as[0].Method != http.MethodPost || as[0].Path != r.path) {
				t.Errorf("sent %s %s, want POST %s", as[0].Method, as[0].Path, r.path)
			}
		})
	}
}

// A bulk made safe to repeat (creates by _id), declared so for its call,
// is retried with the same body: after a 503, as the client alone would
// retry it, and after Elasticsearch's 429 (a rejection: the client alone
// does not retry it, since its default statuses are 502, 503 and 504).
func TestSafeBulkRetried(t *testing.T) {
	bulk := func(es *elasticsearch.Client) (*esapi.Response, error) {
		return safeBulk(context.Background(), es, strings.NewReader(createLogs))
	}
	for _, tt := range []struct{ first, alone int }{{http.StatusServiceUnavailable, 2}, {http.StatusTooManyRequests, 1}} {
		if as, _ := sends(t, true, tt.first, bulk); len(as) != tt.alone {
			t.Errorf("%d first: the client alone sent it %d times, want %d", tt.first, len(as), tt.alone)
		}
		as, status := sends(t, false, tt.first, bulk)
		if status != http.StatusOK || len(as) != 2 {
			t.Errorf("%d first: status %d after %d sends, want 200 after 2", tt.first, status, len(as))
		}
		if err := retrytest.CheckSameBody(as, []byte(createLogs)); err != nil {
			t.Errorf("%d first: %v", tt.first, err)
		}
	}
}

// esutil.BulkIndexer's flushes are declared the same way, by OnFlushStart,
// when each of its items names its document: one answered 503, then 200,
// is sent twice and creates the document.
func TestBulkIndexerFlushDeclaredSafe(t *testing.T) {
	srv := retrytest.NewUnstartedServer(retrytest.Reply{Status: http.StatusServiceUnavailable, Header: product})
	srv.Then = retrytest.Reply{Header: product, Body: `{"errors":false,"items":[{"create":{"_id":"log-1","status":201}}]}`}
	srv.Start()
	defer srv.Close()
	es, err := newClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := esutil.NewBulkIndexer(esutil.BulkIndexerConfig{
		Client:       es,
		NumWorkers:   1,
		OnFlushStart: func(ctx context.Context) context.Context { return retryhttp.Idempotent(ctx) },
	})
	if err != nil {
		t.Fatal(err)
	}
	item := esutil.BulkIndexerItem{Index: "logs", Action: "create", DocumentID: "log-1", Body: strings.NewReader(`{"msg":"hi"}`)}
	if err := bi.Add(context.Background(), item); err != nil {
		t.Fatal(err)
	}
	if err := bi.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := bi.Stats(); st.NumCreated != 1 || st.NumFailed != 0 || srv.Count() != 2 {
		t.Errorf("%d created, %d failed after %d sends; want 1, 0 after 2", st.NumCreated, st.NumFailed, srv.Count())
	}
}
