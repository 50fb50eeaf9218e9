// Numbers as people read them.
export function formatBytes(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(n < 10 ? 2 : 1)) + ' ' + units[i];
}

export function formatSeconds(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '–';
  if (s < 1) return (s * 1000).toFixed(s < 0.01 ? 2 : 0) + ' ms';
  return s.toFixed(s < 10 ? 2 : 1) + ' s';
}

export function formatPercent(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '–';
  return (x * 100).toFixed(x < 0.1 ? 1 : 0) + ' %';
}

export function formatRate(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '–';
  return x < 10 ? x.toFixed(2) : Math.round(x).toLocaleString('en');
}

// A wait as people say it: "40 s", "3 min 5 s", "1 h 12 min".
export function formatDuration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '–';
  const whole = Math.max(1, Math.round(s));
  if (whole < 60) return whole + ' s';
  if (whole < 3600) return Math.floor(whole / 60) + ' min ' + (whole % 60) + ' s';
  return Math.floor(whole / 3600) + ' h ' + Math.round((whole % 3600) / 60) + ' min';
}
