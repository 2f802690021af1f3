// Package chart draws taoflow's charts as server-rendered SVG: Lines
// (metric against epoch, a curve per cell, colour by one matrix key and
// dash by another), HeatMap (a final metric over two matrix keys),
// Gantt (nodes per instance and slot over time, idle gaps shaded) and
// Sparkline (one small curve, inline).
//
// SVG rather than a charting library run in the browser: the same markup serves
// the live web page, a phone, and a self-contained report file, with
// nothing to embed, load or keep up to date, and no script for a strict
// Content-Security-Policy to allow. Charts use presentation attributes
// (fill, stroke, font-size), never style attributes or elements, so a CSP
// without 'unsafe-inline' styles shows them whole. Each chart has a
// viewBox and no fixed size: it scales to its container.
//
// Every text a chart shows (names, matrix values, labels, titles) comes
// from plans and jobs, so none is trusted: control characters and
// invalid UTF-8 become U+FFFD and the rest is XML-escaped, in element
// text and attributes alike (text.go). Numbers that are not finite are
// left out.
//
// The package imports only the standard library. Its callers (package
// web, the report) gather the data with runner.ResultTable.Curves,
// runner.ResultTable rows (for HeatMap) and runner.Timeline (for Gantt).
package chart
