// Package s3 keeps checkpoint chunks as objects in an S3-compatible object store (AWS S3, Versity
// Gateway, Ceph RGW...) through aws-sdk-go-v2. It is the object half of persistence/postgres's chunk
// store: the catalog (which hash lives under which key, which chunk references which) stays in
// PostgreSQL; this package only puts, gets, lists and deletes opaque objects.
//
// Two settings matter for stores that are not AWS: path-style addressing (bucket in the path, not in
// the host name) and request checksums only when an operation requires them (aws-sdk-go-v2 otherwise
// sends CRC32 trailers with chunked encoding that many S3-compatible servers refuse).
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/carryover/carryover"
)

// Options locate a bucket.
type Options struct {
	Endpoint  string // e.g. http://127.0.0.1:7070; "" = AWS for Region
	Bucket    string
	Region    string // default us-east-1
	AccessKey string
	SecretKey string
	PathStyle bool
	// Timeout bounds each request (default 30 s): a stalled store fails the checkpoint instead of
	// hanging the turn.
	Timeout time.Duration
}

// Bucket is one bucket of an object store.
type Bucket struct {
	cli  *s3.Client
	tr   *http.Transport
	opts Options
}

// Open makes a client for the bucket and creates the bucket when it does not exist.
func Open(ctx context.Context, o Options) (*Bucket, error) {
	if o.Bucket == "" {
		return nil, errors.New("s3: bucket must be set")
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: time.Minute}
	so := s3.Options{
		Region:       o.Region,
		UsePathStyle: o.PathStyle,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: o.AccessKey, SecretAccessKey: o.SecretKey, Source: "carryover config"}, nil
		}),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		HTTPClient:                 &http.Client{Transport: tr},
		RetryMaxAttempts:           2,
	}
	if o.Endpoint != "" {
		so.BaseEndpoint = aws.String(o.Endpoint)
	}
	b := &Bucket{cli: s3.New(so), tr: tr, opts: o}
	if err := b.ensureBucket(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Bucket) ensureBucket(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	if _, err := b.cli.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b.opts.Bucket}); err == nil {
		return nil
	}
	_, err := b.cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b.opts.Bucket})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("s3: create bucket %s: %w", b.opts.Bucket, err)
	}
	return nil
}

// unsignedPayload signs a put's headers, not its body: over HTTPS the SDK does so by default, over
// plain HTTP it hashed every body with SHA-256 (and the server hashed it again). A chunk carries its
// own address, which every read verifies, so the body's hash guarded nothing the reader does not.
var unsignedPayload = s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)

// Put stores data under key.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	_, err := b.cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &b.opts.Bucket, Key: &key,
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))}, unsignedPayload)
	if err != nil {
		b.tr.CloseIdleConnections()
		return fmt.Errorf("s3: put %s: %w", key, err)
	}
	return nil
}

// PutParts stores the concatenation of parts under key without copying them into one buffer (a
// pack of chunks: the importing server's memory holds each chunk once).
func (b *Bucket) PutParts(ctx context.Context, key string, parts [][]byte) error {
	r := &partsReader{parts: parts}
	for _, p := range parts {
		r.size += int64(len(p))
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	_, err := b.cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &b.opts.Bucket, Key: &key,
		Body: r, ContentLength: aws.Int64(r.size)}, unsignedPayload)
	if err != nil {
		b.tr.CloseIdleConnections()
		return fmt.Errorf("s3: put %s: %w", key, err)
	}
	return nil
}

// partsReader reads parts one after the other; it seeks, so that the SDK can rewind it to retry.
type partsReader struct {
	parts     [][]byte
	size, pos int64
}

func (r *partsReader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	off := r.pos
	for _, part := range r.parts {
		if off < int64(len(part)) {
			n := copy(p, part[off:])
			r.pos += int64(n)
			return n, nil
		}
		off -= int64(len(part))
	}
	return 0, io.EOF
}

func (r *partsReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	}
	if offset < 0 {
		return 0, errors.New("s3: seek before the start")
	}
	r.pos = offset
	return offset, nil
}

// Get returns the object under key; an error wrapping carryover.ErrMissingChunk when there is none.
// A transfer that breaks mid-body (the SDK retries requests, not body reads) is tried again, up to
// three times in all.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	var err error
	for range 3 {
		var data []byte
		if data, err = b.get(ctx, key); err == nil || errors.Is(err, carryover.ErrMissingChunk) || ctx.Err() != nil {
			return data, err
		}
		b.tr.CloseIdleConnections() // after a reset, the other pooled connections are likely dead too
	}
	return nil, err
}

func (b *Bucket) get(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	out, err := b.cli.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.opts.Bucket, Key: &key})
	if isNotFound(err) {
		return nil, fmt.Errorf("s3: object %s: %w", key, carryover.ErrMissingChunk)
	}
	if err != nil {
		return nil, fmt.Errorf("s3: get %s: %w", key, err)
	}
	defer out.Body.Close()
	var data []byte
	if n := aws.ToInt64(out.ContentLength); n > 0 && n <= maxPrealloc {
		// One allocation of the object's size: io.ReadAll's doublings left twice a pack's size of
		// garbage per GET (the restoring server's memory).
		data = make([]byte, n)
		_, err = io.ReadFull(out.Body, data)
	} else {
		data, err = io.ReadAll(out.Body)
	}
	if err != nil {
		return nil, fmt.Errorf("s3: get %s: %w", key, err)
	}
	return data, nil
}

// maxPrealloc bounds the buffer a GET allocates up front from the answer's Content-Length.
const maxPrealloc = 64 << 20

// Exists reports whether an object is stored under key.
func (b *Bucket) Exists(ctx context.Context, key string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	_, err := b.cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.opts.Bucket, Key: &key})
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("s3: head %s: %w", key, err)
	}
	return true, nil
}

// Delete removes the objects under keys; a key with no object is not an error.
func (b *Bucket) Delete(ctx context.Context, keys []string) error {
	for _, key := range keys {
		rctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
		_, err := b.cli.DeleteObject(rctx, &s3.DeleteObjectInput{Bucket: &b.opts.Bucket, Key: &key})
		cancel()
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("s3: delete %s: %w", key, err)
		}
	}
	return nil
}

// List calls fn for every object under prefix with its last-modified time.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(key string, modified time.Time) error) error {
	p := s3.NewListObjectsV2Paginator(b.cli, &s3.ListObjectsV2Input{Bucket: &b.opts.Bucket, Prefix: &prefix})
	for p.HasMorePages() {
		rctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
		page, err := p.NextPage(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("s3: list %s: %w", prefix, err)
		}
		for _, o := range page.Contents {
			if err := fn(aws.ToString(o.Key), aws.ToTime(o.LastModified)); err != nil {
				return err
			}
		}
	}
	return nil
}

// isNotFound reports whether err says the key (or bucket) is not there.
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "NoSuchKey" || ae.ErrorCode() == "NotFound")
}
