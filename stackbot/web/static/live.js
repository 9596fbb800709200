// Live updates: poll a cheap change token and reload the page when it changes.
(function () {
  var token = null;
  var label = document.getElementById("live");
  function tick() {
    fetch("/api/changes", { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (data) {
        if (token !== null && data.token !== token) { window.location.reload(); return; }
        token = data.token;
        if (label) { label.textContent = "live · updated " + new Date().toLocaleTimeString(); }
      })
      .catch(function () { if (label) { label.textContent = "live · offline"; } });
  }
  tick();
  setInterval(tick, 3000);
})();
