// A request URL's pathname for the router (src/shell/entry.mjs), without a URL parse in
// the common case. Tested against `new URL()` in tests/shell-path.test.mjs.

/**
 * The pathname of `request.url` as `new URL(url).pathname` gives it. The runtime's URL is
 * already serialized, so it is a plain slice unless it holds something the parser rewrites
 * (dot segments, their percent-encoded forms, backslashes): those take the parser.
 */
// Decided in JavaScript for speed: a serialized URL's pathname is sliced, the parser only for what it would rewrite.
export function pathnameOf(url) {
  const scheme = url.indexOf("://");
  const start = scheme < 0 ? -1 : url.indexOf("/", scheme + 3);
  if (start < 0) return new URL(url).pathname;
  let end = url.indexOf("?", start);
  const hash = url.indexOf("#", start);
  if (end < 0 || (hash >= 0 && hash < end)) end = hash;
  const path = end < 0 ? url.slice(start) : url.slice(start, end);
  if (path.includes("/.") || path.includes("%2") || path.includes("\\")) return new URL(url).pathname;
  return path;
}
