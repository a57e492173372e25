// volthub developer dashboard: the live event inspector. It reads the signed-in user's
// channel as server-sent events (/developer/events, the session cookie authenticates it)
// and lists each event as it arrives, newest first.
(function () {
  'use strict';
  var state = document.getElementById('inspector-state');
  var log = document.getElementById('inspector-log');
  if (!state || !log || !window.EventSource) return;
  var source = new EventSource(state.getAttribute('data-src'));
  source.addEventListener('connected', function () { state.textContent = 'connected'; });
  source.onmessage = function (message) {
    var envelope = JSON.parse(message.data);
    var line = document.createElement('div');
    line.className = 'event';
    line.setAttribute('data-event', envelope.event);
    line.setAttribute('data-id', message.lastEventId);
    line.textContent = envelope.timestamp + '  ' + envelope.event + '  ' + message.lastEventId + '\n  ' +
      JSON.stringify(envelope.data);
    log.insertBefore(line, log.firstChild);
  };
  source.onerror = function () { state.textContent = 'reconnecting…'; };
})();

// The test-event form: sent in the background, so the inspector above keeps its stream
// (without script the form posts and the page reloads with the result).
(function () {
  'use strict';
  var form = document.getElementById('test-event');
  var result = document.getElementById('test-result');
  if (!form || !result || !window.fetch) return;
  form.addEventListener('submit', function (submit) {
    submit.preventDefault();
    fetch(form.action, {
      method: 'POST',
      body: new URLSearchParams(new FormData(form)),
      headers: {Accept: 'application/json'},
      credentials: 'same-origin',
    }).then(function (response) {
      return response.json().then(function (body) {
        result.className = 'flash ' + (response.ok ? 'ok' : 'bad');
        result.textContent = response.ok ? 'Sent test event ' + body.eventId + ' (' + body.event + ').' : body.message;
        result.setAttribute('data-event-id', response.ok ? body.eventId : '');
      });
    }).catch(function () {
      result.className = 'flash bad';
      result.textContent = 'The test event could not be sent.';
    });
  });
})();
