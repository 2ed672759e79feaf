// The simulator's HTML report: one self-contained page (no network needed to open it) with notes,
// plain tables, line charts and panel sets (small multiples, one panel shown at a time) drawn by
// Chart.js, which is compiled into this library.
//
// All strings are treated as untrusted text and escaped; output is deterministic (the same Report
// always renders to byte-identical HTML). Once loaded, the page reports its own health on <body>:
// data-status is "ok" or "error: <reason>" (a script error, a chart without data points, or a
// chart that drew nothing), data-charts is the number of charts rendered and data-points the total
// number of points across them — the charts of every panel included: all are drawn when the page
// loads, then the panels not selected are hidden.
// Thread-safety: free functions without shared state; safe to call concurrently (with distinct
// paths for WriteHtmlReport).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace estuary::report {

// One line. Its points are (x[i], y[i]) for i < min(x.size(), y.size()); a non-finite value
// leaves a gap in the line.
struct Series {
  std::string label;
  std::vector<double> x;
  std::vector<double> y;
  bool dashed = false;
  // Palette index of the line's colour; -1 (default) takes the series' position in its chart.
  // Series that share an index share a colour (e.g. a measured curve and its published twin).
  int color = -1;
};

// A line chart with a numeric x axis. `id` names the chart in the page's error messages.
struct Chart {
  std::string id;
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
};

// Cells are shown as given; rows may have fewer or more cells than the header.
struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// One panel of a PanelSet: a grid of small charts (e.g. one per queue of one configuration).
struct Panel {
  std::string label;  // the panel's option in the set's selector; unique within the set
  std::vector<Chart> charts;
};

// Small multiples that stay readable with many of them: a section with its notes and tables, a
// selector of panels (one shown at a time, the first by default, or the one named in the page's
// URL as #<id>=<label>) and a filter that shows only the charts whose title contains its text.
// The shown panel's label is kept in the section's data-shown attribute.
struct PanelSet {
  std::string id;  // names the set in the page (data-panels-id) and in its URL fragment
  std::string title;
  std::vector<std::string> notes;
  std::vector<Table> tables;
  std::string selector_label;  // e.g. "configuration"
  std::vector<Panel> panels;
};

// Rendered in this order: title, notes (a bullet list), tables, charts, panel sets.
struct Report {
  std::string title;
  std::vector<std::string> notes;
  std::vector<Table> tables;
  std::vector<Chart> charts;
  std::vector<PanelSet> panel_sets;
};

// Writes a self-contained HTML page to `path`. Returns a Status naming the path on an I/O error.
Status WriteHtmlReport(const Report& report, const std::string& path);

// Renders the page to a string (used by WriteHtmlReport and tests).
std::string RenderHtmlReport(const Report& report);

}  // namespace estuary::report
