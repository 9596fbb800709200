// A job's log opens at its first failing line (as Prow's Spyglass does): when the page is
// opened at #log (the link the verdicts give) or with no anchor, the log box scrolls to the
// first highlighted line; a #L<n> anchor scrolls to that line instead.
(function () {
  var log = document.getElementById("log");
  if (!log) { return; }
  var hash = window.location.hash.slice(1);
  var target = null;
  if (/^L\d+$/.test(hash)) { target = document.getElementById(hash); }
  else if (hash === "log" || hash === "") {
    var first = log.getAttribute("data-first-failure");
    target = first ? document.getElementById(first) : null;
  }
  if (!target) { return; }
  target.classList.add("first-failure");
  log.scrollTop = Math.max(0, target.offsetTop - log.offsetTop - 3 * target.offsetHeight);
  if (hash === "log") { log.scrollIntoView({ block: "start" }); }
})();
