// Live refresh, the console's only script: an element with data-live is
// reloaded from the page's own URL with partial=1 every data-every ms while
// the tab is visible, until the fragment says its order ended (data-ended).
// The element is replaced only when the fragment changed.
(function () {
  'use strict';
  document.querySelectorAll('[data-live]').forEach(function (el) {
    var every = parseInt(el.dataset.every, 10) || 2000;
    var url = new URL(window.location.href);
    url.searchParams.set('partial', '1');
    url.searchParams.delete('flash');
    var busy = false;
    var timer = setInterval(function () {
      if (busy || document.hidden) {
        return;
      }
      busy = true;
      fetch(url, { credentials: 'same-origin', cache: 'no-store' })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (html === null) {
            return;
          }
          var fresh = document.createElement('template');
          fresh.innerHTML = html;
          if (fresh.innerHTML === el.innerHTML) {
            return; // nothing changed: leave the page alone (a click may be on its way)
          }
          el.innerHTML = fresh.innerHTML;
          if (el.querySelector('[data-ended]')) {
            clearInterval(timer);
          }
        })
        .catch(function () { /* the console may be restarting: try again next time */ })
        .finally(function () { busy = false; });
    }, every);
  });
})();
