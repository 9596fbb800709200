// Live updates without reloading: poll a cheap change token; when it changes, ask the server
// whether *this* page changed (a conditional GET: the browser sends the ETag of the copy it
// holds and the server answers 304 Not Modified when the page is the same, see
// stackbot/web/conditional.py) and only when it did, replace the parts of <main> that differ,
// so scrolling stays where it is. Never
// while the reader hovers something with a tooltip or a link, selects text or types: the patch
// waits for the next poll. "updated" is when the data last changed, not when we last polled.
(function () {
  var token = null;
  var stale = false;
  var etag = null;  // of the copy shown (unknown until the first check)
  var label = document.getElementById("live");

  function readerBusy() {
    var selection = window.getSelection ? window.getSelection() : null;
    if (selection && !selection.isCollapsed) { return true; }
    return document.querySelector("main [title]:hover, main a:hover, main input:focus, main details[open]:hover") !== null;
  }

  function show(changedAt, note) {
    if (!label) { return; }
    var text = "live";
    if (changedAt) { text += " · updated " + new Date(changedAt).toLocaleTimeString(); }
    label.textContent = text + (note ? " · " + note : "");
  }

  function patch() {
    // "no-cache": revalidate the browser's copy (If-None-Match); a 304 comes back as that copy.
    return fetch(window.location.href, { cache: "no-cache", headers: { Accept: "text/html" } })
      .then(function (r) {
        var fresh = r.headers.get("ETag");
        if (r.status === 304 || (fresh && fresh === etag)) { return null; }
        etag = fresh;
        return r.text();
      })
      .then(function (html) {
        if (html === null) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        var main = document.querySelector("main");
        if (!fresh || !main) { return; }
        var now = main.children, next = fresh.children;
        if (now.length !== next.length) { main.innerHTML = fresh.innerHTML; return; }
        for (var i = 0; i < next.length; i++) {
          if (now[i].outerHTML !== next[i].outerHTML) { now[i].replaceWith(next[i].cloneNode(true)); }
        }
      });
  }

  function tick() {
    fetch("/api/changes", { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (data) {
        if (token !== null && data.token !== token) { stale = true; }
        token = data.token;
        if (stale && readerBusy()) { show(data.changed_at, "new data waits until you move away"); return; }
        show(data.changed_at, "");
        if (stale) { stale = false; return patch(); }
      })
      .catch(function () { if (label) { label.textContent = "live · offline"; } });
  }
  tick();
  setInterval(tick, 3000);
})();
