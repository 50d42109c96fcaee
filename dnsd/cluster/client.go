package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/transmirror/transmirror/zones"
)

// newClient returns an etcd client for e; it connects when first used.
func newClient(e zones.EtcdConfig) (*lazyClient, error) {
	cfg := clientv3.Config{
		Endpoints: slices.Clone(e.Endpoints), DialTimeout: e.DialTimeout.D(),
		Username: e.Username, Password: e.Password,
		Logger: zap.NewNop(), // the errors that matter come back to dnsd's own log
	}
	if e.TLS() {
		tc, err := tlsConfig(e)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	return &lazyClient{cfg: cfg}, nil
}

func tlsConfig(e zones.EtcdConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: etcd ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cluster: etcd ca_file %s: no PEM certificate", e.CAFile)
		}
		tc.RootCAs = pool
	}
	if e.CertFile != "" {
		c, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: etcd client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

// lazyClient is the etcd client of a Store, made when first used and
// made again at the next use after that failed: clientv3.New, with a
// username and password, authenticates before it returns, so that an
// etcd away or refusing when dnsd starts would fail the Store and dnsd's
// start, where the Store starts degraded instead (Load). Once made, the
// client reconnects by itself. Its methods are clientv3's.
type lazyClient struct {
	cfg clientv3.Config
	mu  sync.Mutex
	cli *clientv3.Client // nil until made
}

// client returns the client, making it if there is none yet; an error
// says why it could not be made.
func (c *lazyClient) client() (*clientv3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cli != nil {
		return c.cli, nil
	}
	cli, err := clientv3.New(c.cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd client: %w", err)
	}
	c.cli = cli
	return cli, nil
}

func (c *lazyClient) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	cli, err := c.client()
	if err != nil {
		return nil, err
	}
	return cli.Get(ctx, key, opts...)
}

func (c *lazyClient) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	cli, err := c.client()
	if err != nil {
		return nil, err
	}
	return cli.Put(ctx, key, val, opts...)
}

func (c *lazyClient) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	cli, err := c.client()
	if err != nil {
		return nil, err
	}
	return cli.Delete(ctx, key, opts...)
}

// Txn is clientv3's; without a client its Commit returns why.
func (c *lazyClient) Txn(ctx context.Context) clientv3.Txn {
	cli, err := c.client()
	if err != nil {
		return failedTxn{err}
	}
	return cli.Txn(ctx)
}

func (c *lazyClient) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	cli, err := c.client()
	if err != nil {
		return nil, err
	}
	return cli.Grant(ctx, ttl)
}

func (c *lazyClient) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	cli, err := c.client()
	if err != nil {
		return nil, err
	}
	return cli.Revoke(ctx, id)
}

func (c *lazyClient) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	cli, err := c.client()
	if err != nil {
		return nil, err
	}
	return cli.KeepAlive(ctx, id)
}

// Watch is clientv3's; without a client the channel is closed at once.
func (c *lazyClient) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	cli, err := c.client()
	if err != nil {
		ch := make(chan clientv3.WatchResponse)
		close(ch)
		return ch
	}
	return cli.Watch(ctx, key, opts...)
}

// Close closes the client, if there is one.
func (c *lazyClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cli == nil {
		return nil
	}
	return c.cli.Close()
}

// explain is explain for this client's endpoints.
func (c *lazyClient) explain(err error) error { return explain(err, c.cfg) }

// failedTxn is a transaction that fails with err when committed.
type failedTxn struct{ err error }

func (t failedTxn) If(...clientv3.Cmp) clientv3.Txn        { return t }
func (t failedTxn) Then(...clientv3.Op) clientv3.Txn       { return t }
func (t failedTxn) Else(...clientv3.Op) clientv3.Txn       { return t }
func (t failedTxn) Commit() (*clientv3.TxnResponse, error) { return nil, t.err }

// explainBudget bounds explain's look at the endpoints.
const explainBudget = time.Second

// explain adds to err, when it is a request that ran out of time (the
// etcd client says no more than that), what a connection to the
// endpoints shows: refused, a TLS handshake that fails (a server
// certificate that ca_file does not verify), or an alert that etcd sends
// after it (a client certificate missing or not trusted: etcd's
// --client-cert-auth). Any other err, or a connection that shows nothing
// wrong, is err as it is.
func explain(err error, cfg clientv3.Config) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	deadline := time.Now().Add(explainBudget)
	for _, ep := range cfg.Endpoints {
		if why := look(ep, cfg.TLS, deadline); why != nil {
			return fmt.Errorf("%w (%s: %v)", err, ep, why)
		}
	}
	return err
}

// look connects to endpoint ep (with tc for https) and returns what is
// wrong with the connection, nil when nothing shows before deadline.
func look(ep string, tc *tls.Config, deadline time.Time) error {
	u, err := url.Parse(ep)
	if err != nil {
		return nil
	}
	d := &net.Dialer{Deadline: deadline}
	if u.Scheme != "https" {
		conn, err := d.Dial("tcp", u.Host)
		if err == nil {
			conn.Close()
		}
		return err
	}
	tc = tc.Clone()
	if tc.ServerName == "" {
		tc.ServerName = u.Hostname()
	}
	conn, err := tls.DialWithDialer(d, "tcp", u.Host, tc)
	if err != nil {
		return err
	}
	defer conn.Close()
	// With TLS 1.3 the server checks the client's certificate after the
	// client's handshake is done, and says so in an alert: read it.
	if soon := time.Now().Add(200 * time.Millisecond); soon.Before(deadline) {
		deadline = soon
	}
	_ = conn.SetReadDeadline(deadline)
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return err
}
