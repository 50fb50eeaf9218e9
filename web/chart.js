// The figures panel's chart, drawn on a canvas without a chart library: bytes read per token as
// stacked bars (trunk below, experts above) and seconds per token as a line, one column per
// generated token, the newest on the right. Each series has its own scale, printed at the top.
import { formatBytes } from './format.js';

function cssColor(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

export function drawChart(canvas, samples) {
  const dpr = window.devicePixelRatio || 1;
  // Drawn at its size on screen. A hidden chart (the figures drawer closed on a phone) has no
  // size: it is left alone, never sized from its own backing store (which is already dpr times
  // larger, and grew by that factor at every poll).
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (!width || !height) return;
  if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, height);
  const top = 16, bottom = height - 2;
  const plot = bottom - top;
  ctx.strokeStyle = cssColor('--border');
  ctx.beginPath();
  ctx.moveTo(0, bottom + 0.5);
  ctx.lineTo(width, bottom + 0.5);
  ctx.stroke();
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = cssColor('--muted');
  if (samples.length === 0) {
    ctx.fillText('no tokens generated yet', 8, top + plot / 2);
    return;
  }
  const maxBytes = Math.max(1, ...samples.map((s) => s.trunk_bytes + s.expert_bytes));
  const maxSeconds = Math.max(1e-6, ...samples.map((s) => s.seconds));
  const step = width / Math.max(samples.length, 60);
  const x0 = width - step * samples.length;
  samples.forEach((s, i) => {
    const x = x0 + i * step;
    const trunk = (s.trunk_bytes / maxBytes) * plot;
    const experts = (s.expert_bytes / maxBytes) * plot;
    ctx.fillStyle = cssColor('--chart-trunk');
    ctx.fillRect(x, bottom - trunk, Math.max(1, step - 1), trunk);
    ctx.fillStyle = cssColor('--chart-experts');
    ctx.fillRect(x, bottom - trunk - experts, Math.max(1, step - 1), experts);
  });
  ctx.strokeStyle = cssColor('--chart-spt');
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  samples.forEach((s, i) => {
    const x = x0 + i * step + step / 2;
    const y = bottom - (s.seconds / maxSeconds) * plot;
    if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
  });
  ctx.stroke();
  ctx.fillStyle = cssColor('--muted');
  ctx.fillText('max ' + maxSeconds.toFixed(3) + ' s', 4, 11);
  const label = 'max ' + formatBytes(maxBytes);
  ctx.fillText(label, width - ctx.measureText(label).width - 4, 11);
}
