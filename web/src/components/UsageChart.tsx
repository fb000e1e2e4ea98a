// Minutes and cost per day (GET /api/v1/usage/daily) drawn with uPlot: bars of minutes on the left
// axis, a line of cost per currency on the right. This module and uPlot are a chunk of their own,
// loaded by the usage page with import() only when it opens, so a first visit does not carry them
// (docs/benchmarks.md "Dashboard weight"). The canvas is decoration for screen readers: the page
// gives the same numbers as a table beside it.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { DailyUsage } from '../types';

const COST_COLOURS = ['#b3261e', '#5b2fb0', '#146c2e'];

/** Digits after the point for a currency, as the browser formats it (2 when unknown). */
function digitsOf(currency: string): number {
  try {
    return new Intl.NumberFormat(undefined, { style: 'currency', currency: currency.toUpperCase() }).resolvedOptions()
      .maximumFractionDigits ?? 2;
  } catch {
    return 2;
  }
}

export default function UsageChart(props: { data: DailyUsage }) {
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const days = props.data.days;
    const currencies = [...new Set(days.flatMap((d) => d.totals.map((t) => t.currency)))].sort();
    const xs = days.map((d) => Date.parse(d.start) / 1000);
    const minutes = days.map((d) => d.minutes);
    // Cost in major units for the axis: the server's amounts, only placed by the currency's digits.
    const costs = currencies.map((c) => {
      const scale = 10 ** digitsOf(c);
      return days.map((d) => (d.totals.find((t) => t.currency === c)?.amount_minor ?? 0) / scale);
    });
    const width = () => Math.max(280, el.clientWidth);
    const options: uPlot.Options = {
      width: width(),
      height: 240,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      // Half a day of room either side, so the first and last days' bars are whole.
      scales: { x: { time: true, range: (_u, min, max) => [min - 43200, max + 43200] }, minutes: { range: (_u, _min, max) => [0, Math.max(10, max * 1.1)] }, cost: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [
        { stroke: '#4a5263', grid: { show: false } },
        { scale: 'minutes', stroke: '#4a5263', label: 'Minutes', grid: { stroke: '#e6e9ef' } },
        { scale: 'cost', side: 1, stroke: '#4a5263', label: currencies.length ? `Cost (${currencies.map((c) => c.toUpperCase()).join(', ')})` : 'Cost', grid: { show: false } },
      ],
      series: [
        { label: 'Day', value: (_u, v) => (v == null ? '' : new Date(v * 1000).toLocaleDateString()) },
        {
          label: 'Minutes',
          scale: 'minutes',
          stroke: '#1f5fd6',
          fill: 'rgba(31, 95, 214, 0.35)',
          paths: uPlot.paths.bars!({ size: [0.7, 40] }),
          points: { show: false },
        },
        ...currencies.map((c, i) => ({
          label: `Cost ${c.toUpperCase()}`,
          scale: 'cost',
          stroke: COST_COLOURS[i % COST_COLOURS.length],
          width: 2,
          points: { show: false },
          value: (_u: uPlot, v: number | null) => (v == null ? '' : v.toFixed(digitsOf(c))),
        })),
      ],
    };
    const plot = new uPlot(options, [xs, minutes, ...costs] as uPlot.AlignedData, el);
    const resize = new ResizeObserver(() => plot.setSize({ width: width(), height: 240 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [props.data]);

  return <div ref={box} class="usage-chart" aria-hidden="true" data-testid="usage-chart" />;
}
