// Package pagetoken turns store cursors into opaque, tamper-evident page tokens.
//
// A token carries the cursor (the last key a page read) and an HMAC over it and over a
// scope: the listing, the tenant and a digest of the request's filters. A token that
// was altered, that was minted for another tenant or another listing, or that is
// replayed with different filters fails to open, so a caller cannot steer a scan
// outside its own range. The key comes from the store (Store.TokenKey), so tokens
// survive restarts. PageSize holds the page sizes every List RPC shares.
package pagetoken
