#include "sim/report/report.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace estuary::report {
namespace internal {
// Content of chart.js/dist/chart.umd.js; defined in the generated chart_js.cc.
extern const char kChartJs[];
}  // namespace internal

namespace {

constexpr std::string_view kStyle = R"css(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       color: #1f2328; background: #fff; max-width: 1100px; margin: 0 auto; padding: 24px; }
h1 { font-size: 1.6em; margin: 0 0 12px; }
h2 { font-size: 1.15em; margin: 32px 0 8px; }
ul.notes { color: #444; padding-left: 20px; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #d0d7de; padding: 4px 10px; text-align: left; white-space: nowrap; }
th { background: #f6f8fa; }
tbody tr:nth-child(even) { background: #fafbfc; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.chart-box { position: relative; height: 380px; }
[hidden] { display: none !important; }
.panel-controls { display: flex; gap: 24px; align-items: center; margin: 12px 0; flex-wrap: wrap; }
.panel-grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 12px 20px; }
.panel-grid h3 { font-size: 0.95em; margin: 8px 0 4px; font-weight: 600; }
.small-chart-box { position: relative; height: 260px; }
footer { margin-top: 40px; color: #888; font-size: 0.8em; }
)css";

// Installed before any other script so that every uncaught error marks the page as broken.
// "ResizeObserver loop ..." is a benign browser notice, not a failure of the page.
constexpr std::string_view kErrorHook = R"js(
window.addEventListener('error', function (e) {
  var message = (e && e.message) ? e.message : 'script error';
  if (message.indexOf('ResizeObserver loop') !== -1) return;
  document.body.dataset.status = 'error: ' + message;
});
)js";

constexpr std::string_view kMain = R"js(
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#17becf', '#e377c2',
                 '#8c564b', '#bcbd22', '#393b79'];
  function paintedPixels(canvas) {
    if (!canvas.width || !canvas.height) return 0;
    var px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    var n = 0;
    for (var i = 3; i < px.length; i += 4) if (px[i] !== 0) n++;
    return n;
  }
  function num(v) { return v === null ? NaN : v; }
  var problems = [];
  var rendered = 0;
  var totalPoints = 0;
  data.charts.forEach(function (spec, i) {
    var canvas = document.getElementById('chart-' + i);
    var chartPoints = 0;
    var small = spec.small === true;
    var datasets = spec.series.map(function (s, j) {
      var points = [];
      for (var k = 0; k < s.x.length; k++) points.push({x: num(s.x[k]), y: num(s.y[k])});
      chartPoints += points.length;
      var color = palette[(s.color >= 0 ? s.color : j) % palette.length];
      // The translucent fill keeps a dashed border visible in the legend box.
      return {label: s.label, data: points, borderColor: color, backgroundColor: color + '33',
              borderWidth: small ? 1.5 : 2, borderDash: s.dashed ? [6, 4] : [], pointRadius: 0,
              pointHoverRadius: 4, tension: 0, fill: false};
    });
    new Chart(canvas, {
      type: 'line',
      data: {datasets: datasets},
      options: {
        animation: false,
        parsing: false,
        responsive: true,
        maintainAspectRatio: false,
        interaction: {mode: 'nearest', axis: 'x', intersect: false},
        plugins: {legend: {display: true, position: 'bottom',
                           labels: small ? {boxWidth: 18, boxHeight: 8, font: {size: 10}}
                                         : {boxWidth: 36, boxHeight: 10}}},
        scales: {
          x: {type: 'linear', title: {display: spec.x_label !== '', text: spec.x_label}},
          y: {type: 'linear', title: {display: spec.y_label !== '', text: spec.y_label}}
        }
      }
    });
    rendered++;
    totalPoints += chartPoints;
    if (chartPoints === 0 || paintedPixels(canvas) === 0) problems.push('empty chart ' + spec.id);
  });
  // Panel sets: every chart above was drawn while all panels were visible; now show one panel per
  // set (the one named in the URL as #<id>=<label>, else the first) and wire the selector and the
  // title filter.
  var wanted = {};
  location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
    var at = kv.indexOf('=');
    if (at > 0) {
      try { wanted[decodeURIComponent(kv.slice(0, at))] = decodeURIComponent(kv.slice(at + 1)); } catch (e) {}
    }
  });
  Array.prototype.forEach.call(document.querySelectorAll('section.panel-set'), function (set) {
    var panels = set.querySelectorAll('.panel');
    var select = set.querySelector('select.panel-select');
    var filter = set.querySelector('input.panel-filter');
    function show(label) {
      var found = false;
      Array.prototype.forEach.call(panels, function (p) { if (p.dataset.panel === label) found = true; });
      if (!found && panels.length) label = panels[0].dataset.panel;
      Array.prototype.forEach.call(panels, function (p) { p.hidden = p.dataset.panel !== label; });
      set.dataset.shown = label;
      if (select) select.value = label;
    }
    function applyFilter() {
      var text = filter ? filter.value.trim().toLowerCase() : '';
      Array.prototype.forEach.call(set.querySelectorAll('.panel-cell'), function (cell) {
        cell.hidden = text !== '' && cell.dataset.title.toLowerCase().indexOf(text) === -1;
      });
    }
    show(wanted[set.dataset.panelsId]);
    if (select) select.addEventListener('change', function () { show(select.value); });
    if (filter) filter.addEventListener('input', applyFilter);
  });
  var body = document.body;
  body.dataset.charts = String(rendered);
  body.dataset.points = String(totalPoints);
  if (body.dataset.status.indexOf('error') === 0) return;
  body.dataset.status = problems.length ? 'error: ' + problems.join('; ') : 'ok';
})();
)js";

// Escapes text for HTML element content and double- or single-quoted attribute values.
void AppendEscaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
}

std::string Escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  AppendEscaped(out, text);
  return out;
}

// A number, optionally followed by '%': right-aligned in tables.
bool LooksNumeric(std::string_view cell) {
  if (!cell.empty() && cell.back() == '%') cell.remove_suffix(1);
  if (cell.empty()) return false;
  double value = 0;
  const char* end = cell.data() + cell.size();
  auto [ptr, ec] = std::from_chars(cell.data(), end, value);
  return ec == std::errc() && ptr == end;
}

// Every chart of the page, in the order of their canvases (chart-0, chart-1, ...): the report's
// charts, then each panel set's panels' (drawn small).
std::vector<std::pair<const Chart*, bool>> AllCharts(const Report& report) {
  std::vector<std::pair<const Chart*, bool>> all;
  for (const Chart& chart : report.charts) all.emplace_back(&chart, false);
  for (const PanelSet& set : report.panel_sets) {
    for (const Panel& panel : set.panels) {
      for (const Chart& chart : panel.charts) all.emplace_back(&chart, true);
    }
  }
  return all;
}

nlohmann::json ChartData(const Report& report) {
  nlohmann::json charts = nlohmann::json::array();
  for (const auto& [chart_ptr, small] : AllCharts(report)) {
    const Chart& chart = *chart_ptr;
    nlohmann::json series = nlohmann::json::array();
    for (const Series& s : chart.series) {
      const size_t n = std::min(s.x.size(), s.y.size());
      nlohmann::json xs = nlohmann::json::array();
      nlohmann::json ys = nlohmann::json::array();
      for (size_t i = 0; i < n; ++i) {
        // Non-finite values become null, which the page turns into a gap.
        xs.push_back(std::isfinite(s.x[i]) ? nlohmann::json(s.x[i]) : nlohmann::json(nullptr));
        ys.push_back(std::isfinite(s.y[i]) ? nlohmann::json(s.y[i]) : nlohmann::json(nullptr));
      }
      series.push_back({{"label", s.label}, {"dashed", s.dashed}, {"color", s.color}, {"x", std::move(xs)},
                        {"y", std::move(ys)}});
    }
    charts.push_back({{"id", chart.id},
                      {"x_label", chart.x_label},
                      {"y_label", chart.y_label},
                      {"small", small},
                      {"series", std::move(series)}});
  }
  return {{"charts", std::move(charts)}};
}

// JSON safe to place inside <script type="application/json">: '<', '>' and '&' only occur inside
// JSON strings, where their \u escapes are equivalent; with no '<' left, neither "</script" nor
// "<!--" can end or confuse the element. Invalid UTF-8 is replaced rather than thrown on.
std::string ScriptSafeJson(const nlohmann::json& value) {
  const std::string json = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

void AppendTable(std::string& out, const Table& table) {
  out += "<section class=\"table\">\n<h2>";
  AppendEscaped(out, table.title);
  out += "</h2>\n<div class=\"table-wrap\"><table>\n";
  if (!table.header.empty()) {
    out += "<thead><tr>";
    for (const std::string& cell : table.header) {
      out += "<th>";
      AppendEscaped(out, cell);
      out += "</th>";
    }
    out += "</tr></thead>\n";
  }
  out += "<tbody>\n";
  for (const std::vector<std::string>& row : table.rows) {
    out += "<tr>";
    for (const std::string& cell : row) {
      out += LooksNumeric(cell) ? "<td class=\"num\">" : "<td>";
      AppendEscaped(out, cell);
      out += "</td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n</section>\n";
}

void AppendNotes(std::string& out, const std::vector<std::string>& notes) {
  if (notes.empty()) return;
  out += "<ul class=\"notes\">\n";
  for (const std::string& note : notes) {
    out += "<li>";
    AppendEscaped(out, note);
    out += "</li>\n";
  }
  out += "</ul>\n";
}

// A panel set's section; its charts' canvases are chart-<first>, chart-<first + 1>, ...
void AppendPanelSet(std::string& out, const PanelSet& set, size_t& next_chart) {
  out += "<section class=\"panel-set\" data-panels-id=\"" + Escaped(set.id) + "\">\n<h2>";
  AppendEscaped(out, set.title);
  out += "</h2>\n";
  AppendNotes(out, set.notes);
  for (const Table& table : set.tables) AppendTable(out, table);
  out += "<div class=\"panel-controls\"><label>";
  AppendEscaped(out, set.selector_label);
  out += " <select class=\"panel-select\">";
  for (const Panel& panel : set.panels) {
    out += "<option value=\"" + Escaped(panel.label) + "\">";
    AppendEscaped(out, panel.label);
    out += "</option>";
  }
  out += "</select></label><label>filter <input type=\"search\" class=\"panel-filter\" "
         "placeholder=\"part of a chart's title\"></label></div>\n";
  for (const Panel& panel : set.panels) {
    out += "<div class=\"panel\" data-panel=\"" + Escaped(panel.label) + "\">\n<div class=\"panel-grid\">\n";
    for (const Chart& chart : panel.charts) {
      out += "<div class=\"panel-cell\" data-chart-id=\"" + Escaped(chart.id) + "\" data-title=\"" + Escaped(chart.title) +
             "\"><h3>";
      AppendEscaped(out, chart.title);
      out += "</h3><div class=\"small-chart-box\"><canvas id=\"chart-" + std::to_string(next_chart++) +
             "\"></canvas></div></div>\n";
    }
    out += "</div>\n</div>\n";
  }
  out += "</section>\n";
}

}  // namespace

std::string RenderHtmlReport(const Report& report) {
  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>";
  AppendEscaped(out, report.title);
  out += "</title>\n<style>";
  out += kStyle;
  out += "</style>\n</head>\n<body data-status=\"loading\">\n<script>";
  out += kErrorHook;
  out += "</script>\n<h1>";
  AppendEscaped(out, report.title);
  out += "</h1>\n";
  AppendNotes(out, report.notes);
  for (const Table& table : report.tables) AppendTable(out, table);
  for (size_t i = 0; i < report.charts.size(); ++i) {
    const Chart& chart = report.charts[i];
    out += "<section class=\"chart\" data-chart-id=\"" + Escaped(chart.id) + "\">\n<h2>";
    AppendEscaped(out, chart.title);
    out += "</h2>\n<div class=\"chart-box\"><canvas id=\"chart-" + std::to_string(i) +
           "\"></canvas></div>\n</section>\n";
  }
  size_t next_chart = report.charts.size();
  for (const PanelSet& set : report.panel_sets) AppendPanelSet(out, set, next_chart);
  out += "<footer>Generated by estuary. Charts drawn with Chart.js (MIT license), embedded in this "
         "page.</footer>\n";
  out += "<script type=\"application/json\" id=\"report-data\">";
  out += ScriptSafeJson(ChartData(report));
  out += "</script>\n<script>\n";
  out += internal::kChartJs;
  out += "\n</script>\n<script>";
  out += kMain;
  out += "</script>\n</body>\n</html>\n";
  return out;
}

Status WriteHtmlReport(const Report& report, const std::string& path) {
  try {
    const std::string html = RenderHtmlReport(report);
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    if (!file) {
      return Internal("cannot open report file '" + path + "' for writing: " + std::strerror(errno));
    }
    file.write(html.data(), static_cast<std::streamsize>(html.size()));
    file.close();
    if (!file) return Internal("cannot write report file '" + path + "'");
    return Status::Ok();
  } catch (const std::exception& e) {
    return Internal("cannot write report file '" + path + "': " + e.what());
  }
}

}  // namespace estuary::report
