// What the page's Plotly renderer (charts.js) and the isolated chart frame (sandbox.js) share.

/** PLOTLY_CONFIG: the only config plotly.js gets; the figure's own config is not used. */
export const PLOTLY_CONFIG = {
  displaylogo: false, responsive: true, showLink: false, sendData: false, showEditInChartStudio: false,
  showSendToCloud: false, plotlyServerURL: '', topojsonURL: '/topojson-not-bundled/', typesetMath: false,
  modeBarButtonsToRemove: ['sendDataToCloud'],
};

/** PLOTLY_HEIGHT: plotly.js's own default height, used when the figure's layout names none. */
export const PLOTLY_HEIGHT = 450;

// GL_TYPES: the trace types plotly.js draws with WebGL (regl and the gl-* stack build code with
// new Function, which the page's CSP refuses): a figure holding one is drawn in the isolated frame.
export const GL_TYPES = new Set(['scattergl', 'scatterpolargl', 'splom', 'parcoords', 'heatmapgl', 'pointcloud',
  'scatter3d', 'surface', 'mesh3d', 'cone', 'streamtube', 'volume', 'isosurface',
  'scattermapbox', 'choroplethmapbox', 'densitymapbox']);

/** needsIsolation says whether a figure's traces need the isolated frame. */
export function needsIsolation(data) {
  return data.some((t) => t && typeof t === 'object' && GL_TYPES.has(String(t.type || '').toLowerCase()));
}

/**
 * webglMissing returns why a drawn figure shows no plot (plotly.js resolves newPlot even when it could
 * only paint its "WebGL is not supported" notice), or '' when nothing is amiss.
 */
export function webglMissing(el) {
  return el.querySelector('.no-webgl')
    ? 'this chart needs WebGL, which this browser does not offer (hardware acceleration off, or no GPU driver)' : '';
}
