/**
 * A time-series chart (uPlot on a canvas) with its figures in words beside it: the caption says
 * what the chart shows, so it is readable without seeing the canvas (which is hidden from
 * screen readers). The chart follows its container's width.
 */
import { useEffect, useRef } from "preact/hooks"
import uPlot from "uplot"
import "uplot/dist/uPlot.min.css"

export interface Series {
  readonly label: string
  /** One value per time. */
  readonly values: ReadonlyArray<number>
  /** A CSS colour for the line. */
  readonly stroke: string
}

export interface ChartProps {
  readonly id: string
  readonly title: string
  /** Seconds since the epoch, ascending. */
  readonly times: ReadonlyArray<number>
  readonly series: ReadonlyArray<Series>
  readonly caption: string
  readonly unit: string
}

const HEIGHT = 180

export const Chart = ({ id, title, times, series, caption, unit }: ChartProps) => {
  const box = useRef<HTMLDivElement>(null)
  const plot = useRef<uPlot | null>(null)
  const shape = series.map((s) => s.label).join("\u0000")

  useEffect(() => {
    const el = box.current
    if (el === null) return
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height: HEIGHT,
      series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2, points: { show: false } }))],
      axes: [{}, { label: unit, size: 60 }],
      // The x axis is always the hour up to the newest sample, however few samples there are.
      scales: {
        x: { time: true, range: (u) => { const end = u.data[0]?.[u.data[0].length - 1] ?? Date.now() / 1000; return [end - 3600, end] } },
        y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] }
      },
      legend: { live: false },
      cursor: { drag: { x: false, y: false } }
    }
    const u = new uPlot(opts, [[...times], ...series.map((s) => [...s.values])], el)
    plot.current = u
    const resize = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height: HEIGHT }))
    resize.observe(el)
    return () => {
      resize.disconnect()
      u.destroy()
      plot.current = null
    }
  }, [shape, unit])

  useEffect(() => {
    plot.current?.setData([[...times], ...series.map((s) => [...s.values])])
  }, [times, series])

  return (
    <figure class="chart" data-chart={id} data-points={times.length} aria-labelledby={`${id}-title`}>
      <h3 id={`${id}-title`}>{title}</h3>
      <div ref={box} class="chart-canvas" aria-hidden="true" />
      <figcaption id={`${id}-caption`}>{caption}</figcaption>
    </figure>
  )
}
