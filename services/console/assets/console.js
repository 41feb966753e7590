/* global document, window, uPlot */
// The overview's charts: one uPlot chart per outcome from the page's #chart-data block.
// Everything else on the console works without this script.
(function () {
  'use strict';
  var dataEl = document.getElementById('chart-data');
  var host = document.getElementById('outcome-charts');
  if (!dataEl || !host || typeof uPlot === 'undefined') return;
  var data = JSON.parse(dataEl.textContent || '{}');
  var colours = {
    applied: '#1a7f37',
    duplicate: '#6e7781',
    stale: '#9a6700',
    quarantined: '#8250df',
    retrying: '#0969da',
    'dead-lettered': '#cf222e',
  };
  var charts = [];
  function width() {
    return Math.max(240, Math.min(520, host.clientWidth - 16));
  }
  Object.keys(data.series).forEach(function (name) {
    var figure = document.createElement('figure');
    figure.className = 'chart';
    figure.setAttribute('data-chart', name);
    var caption = document.createElement('figcaption');
    var total = data.series[name].reduce(function (a, b) {
      return a + b;
    }, 0);
    caption.textContent = name + ' per minute (' + total + ' in the window)';
    figure.appendChild(caption);
    host.appendChild(figure);
    var opts = {
      width: width(),
      height: 140,
      scales: {
        x: { time: true },
        y: {
          range: function (_u, _min, max) {
            return [0, Math.max(1, max)];
          },
        },
      },
      legend: { show: false },
      series: [{}, { label: name, stroke: colours[name] || '#333', fill: (colours[name] || '#333') + '22', width: 2 }],
      axes: [{}, { size: 40 }],
    };
    charts.push(new uPlot(opts, [data.minutes, data.series[name]], figure));
  });
  window.addEventListener('resize', function () {
    charts.forEach(function (c) {
      c.setSize({ width: width(), height: 140 });
    });
  });
})();
